// A result answered with the text a peer wrote it in. Parsing reads every number as a double, so
// a result written back by JSON.stringify can say something else than its upstream did
// (18446744073709551617 as 18446744073709552000, 1e400 as null, -0.0 as 0): a gateway passing
// on an upstream's result keeps that text here, beside the call, and the reply carries it.
// Server only (IncomingDispatch reads it): the browser client's peer never sees one.
import type { HandlerContext } from './handler-context.js';

/** Each call's kept text, and the result it was kept for. */
const kept = new WeakMap<object, { value: unknown; text: string }>();

/**
 * Answer the call `ctx` with `text` (the JSON text of one value, as a peer wrote it) where its
 * result is `value`; see keptResultText.
 */
export function keepResultText(ctx: HandlerContext<unknown>, value: unknown, text: string): void {
  kept.set(ctx, { value, text });
}

/**
 * The text kept for the call `ctx` when its result is still what it was kept for, and the text
 * still reads as that result (middleware may replace the result, or change it in place);
 * undefined otherwise: JSON.stringify writes the result then.
 */
export function keptResultText(ctx: object, result: unknown): string | undefined {
  const entry = kept.get(ctx);
  if (entry === undefined || entry.value !== result) return undefined;
  return JSON.stringify(JSON.parse(entry.text)) === JSON.stringify(result) ? entry.text : undefined;
}
