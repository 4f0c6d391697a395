import { ErrorCode } from './error-codes.js';
import { isErrorObject } from './errors.js';
import type { ErrorObject } from './types.js';

/*
 * The subscription protocol on the wire, read side: the one place its method names and the
 * params of its notifications are defined for everything that reads them (the client, the
 * CLI). The server writes the same frames in src/pubsub/frames.ts; docs/pubsub.md ("Wire
 * format") shows them. No Node built-ins and no rxjs: the browser client bundles this.
 */

/** The method names of the subscription protocol. */
export interface SubscriptionMethodNames {
  /** The request that subscribes; answered with the subscription id. */
  subscribe: string;
  /** The notification that carries the messages. */
  notification: string;
  /** The request that ends a subscription: `[id]`. */
  unsubscribe: string;
  /** The request that reads a topic's history (`{ topic, last | since, limit }`). Default "history". */
  history?: string;
}

/**
 * The gateway's default names: those of Ethereum nodes and jsonrpsee without their prefix, and
 * `topic.history` for the history request (dotted, so it does not take a name an application
 * is likely to use, such as `history`).
 * Server, client and CLI all take other names (e.g. eth_subscribe, eth_subscription,
 * eth_unsubscribe).
 */
export const DEFAULT_SUBSCRIPTION_METHODS: Readonly<SubscriptionMethodNames> = Object.freeze({
  subscribe: 'subscribe',
  notification: 'subscription',
  unsubscribe: 'unsubscribe',
  history: 'topic.history',
});

/**
 * A subscription id: what the subscribe request is answered with, and what each notification
 * names in `params.subscription`. This gateway hands out strings; other servers of the same
 * protocol hand out numbers too (jsonrpsee's default ids are integers), so a reader takes both.
 * A number is compared as JSON.parse read it, in the reply and in every notification alike (the
 * CLI reads one a double cannot hold as the text the server wrote: src/cli/kept-numbers.ts).
 */
export type SubscriptionId = string | number;

export function isSubscriptionId(value: unknown): value is SubscriptionId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}

/**
 * A sequence number, or a count of messages (`gap`, `missed`), as the server writes them: a
 * non-negative safe integer. Anything else (negative, fractional, 1e300) would move a reader's
 * position where no subscribe's `since` may go, and every later message would look old.
 */
export function isSequenceNumber(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/**
 * What one subscription notification says, by kind. Every kind but the two ends may carry the
 * topic's `epoch`: the numbering its sequence numbers belong to.
 */
export type SubscriptionUpdate =
  /** A message: its data (`result`), the topic's sequence number, messages skipped before it. */
  | { kind: 'message'; result: unknown; seq?: number; missed?: number; epoch?: string }
  /** Where a topic subscription starts: the last sequence number it will not get. No data. */
  | { kind: 'position'; seq: number; epoch?: string }
  /** Only the epoch its sequence numbers belong to. */
  | { kind: 'epoch'; epoch: string }
  /** `gap` messages are lost beyond history (null: unknown how many, or numbered anew). */
  | { kind: 'gap'; gap: number | null; epoch?: string }
  /**
   * The last notification of a per-subscriber stream: it completed; `missed` messages were
   * skipped for a slow consumer just before it.
   */
  | { kind: 'complete'; missed?: number }
  /** The last notification of a per-subscriber stream: it failed with `error` (`missed`: as above). */
  | { kind: 'error'; error: ErrorObject; missed?: number }
  /** Names the subscription but says nothing of the above (ignored by readers). */
  | { kind: 'other' };

/** One subscription notification, read: whose it is, and what it says. */
export interface SubscriptionNotification {
  subscription: SubscriptionId;
  update: SubscriptionUpdate;
}

/**
 * A stream's error that is not a JSON-RPC error object (code an integer, message a string)
 * still ends the stream: as -32603, the value sent kept in `data` and quoted in the message as
 * JSON. JSON.parse reads any nesting without recursion, but JSON.stringify recurses: a value
 * nested a few thousand levels deep (a frame of some kilobytes) is not quoted, since the reader
 * of a frame must not throw.
 */
function streamError(value: unknown): ErrorObject {
  if (isErrorObject(value)) return value;
  let quoted: string;
  try {
    quoted = JSON.stringify(value) ?? String(value);
  } catch {
    quoted = 'a value nested too deep to quote';
  }
  return {
    code: ErrorCode.InternalError,
    message: `the stream ended with an error: ${quoted}`,
    data: value,
  };
}

/**
 * Read the params of a subscription notification. Undefined when they are not one: not an
 * object, or without a valid `subscription` id. Which kind, in this order: `error` (even with
 * `complete`), `complete: true`, `gap`, `result`, a `seq`, a string `epoch`. `seq`, `gap` and
 * `missed` count only as non-negative safe integers (isSequenceNumber): a `gap` of any other
 * value is an unknown one (null), a `seq` or `missed` of any other value is left out.
 */
export function decodeSubscriptionNotification(
  params: unknown,
): SubscriptionNotification | undefined {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const message = params as Record<string, unknown>;
  const subscription = message['subscription'];
  if (!isSubscriptionId(subscription)) return undefined;
  return { subscription, update: decodeUpdate(message) };
}

function decodeUpdate(message: Record<string, unknown>): SubscriptionUpdate {
  const missed = isSequenceNumber(message['missed']) ? message['missed'] : undefined;
  if ('error' in message) {
    const error = streamError(message['error']);
    return missed ? { kind: 'error', error, missed } : { kind: 'error', error };
  }
  if (message['complete'] === true)
    return missed ? { kind: 'complete', missed } : { kind: 'complete' };
  const epoch = typeof message['epoch'] === 'string' ? message['epoch'] : undefined;
  let update: SubscriptionUpdate & { epoch?: string };
  const seq = isSequenceNumber(message['seq']) ? message['seq'] : undefined;
  if ('gap' in message) {
    const gap = message['gap'];
    update = { kind: 'gap', gap: isSequenceNumber(gap) ? gap : null };
  } else if ('result' in message) {
    update = { kind: 'message', result: message['result'] };
    if (seq !== undefined) update.seq = seq;
    if (missed !== undefined) update.missed = missed;
  } else if (seq !== undefined) {
    update = { kind: 'position', seq };
  } else {
    return epoch === undefined ? { kind: 'other' } : { kind: 'epoch', epoch };
  }
  if (epoch !== undefined) update.epoch = epoch;
  return update;
}
