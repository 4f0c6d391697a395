import { InvalidParamsError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';

export interface SubscribeRequest {
  /** Topic or stream name. */
  name: string;
  /** Parameters for a per-subscriber stream (or for the topic's authorize hook). */
  params: unknown;
  /** Resume: the last sequence number the client has; it gets what came after, from history. */
  since?: number;
  /**
   * The epoch `since` belongs to (as the position and gap signals carry it): when the broker's
   * numbering is another one now, the client is told with a gap signal and gets all of history.
   */
  epoch?: string;
  /**
   * Ask for the subscription's starting point: right after accepting, the server sends
   * `{"subscription": id, "seq": N}` (no result), so a client that sees no message before
   * a disconnect can still resume from N. Opt-in: third-party clients expect a result.
   */
  position?: boolean;
}

function positionOf(options: unknown): boolean {
  return (options as { position?: unknown } | null | undefined)?.position === true;
}

/** Epochs are short ids (a Redis topic's, a NATS stream's creation time): anything longer is not one. */
const MAX_EPOCH_LENGTH = 100;

function epochOf(options: unknown): string | undefined {
  const epoch = (options as { epoch?: unknown } | null | undefined)?.epoch;
  if (epoch === undefined || epoch === null) return undefined;
  if (typeof epoch !== 'string' || epoch.length > MAX_EPOCH_LENGTH) {
    throw new InvalidParamsError('"epoch" must be the string a position or gap signal carried');
  }
  return epoch;
}

function sinceOf(options: unknown): number | undefined {
  const since = (options as { since?: unknown } | null | undefined)?.since;
  if (since === undefined) return undefined;
  if (typeof since !== 'number' || !Number.isSafeInteger(since) || since < 0) {
    throw new InvalidParamsError('"since" must be a non-negative integer sequence number');
  }
  return since;
}

/**
 * Read the subscribe method's params. Positional, as Ethereum clients send
 * them: `["newHeads"]`, `["logs", {...}]`, with resume options third:
 * `["prices", null, { "since": 41, "epoch": "..." }]`; or named: `{ "topic": "...", "params": ..., "since": 41 }`.
 */
export function readSubscribeParams(params: Params | undefined): SubscribeRequest {
  if (Array.isArray(params)) {
    const [name, extra, options] = params as unknown[];
    if (typeof name === 'string' && name.length > 0) {
      return {
        name,
        params: extra ?? undefined,
        since: sinceOf(options),
        epoch: epochOf(options),
        position: positionOf(options),
      };
    }
  } else if (params) {
    const { topic, params: extra } = params as { topic?: unknown; params?: unknown };
    if (typeof topic === 'string' && topic.length > 0) {
      return {
        name: topic,
        params: extra,
        since: sinceOf(params),
        epoch: epochOf(params),
        position: positionOf(params),
      };
    }
  }
  throw new InvalidParamsError('Subscribe takes [topic, params?] or { topic, params? }');
}

/** Read the unsubscribe method's params: `["<id>"]` or `{ "subscription": "<id>" }`. */
export function readUnsubscribeParams(params: Params | undefined): string {
  const id = Array.isArray(params)
    ? (params as unknown[])[0]
    : (params as { subscription?: unknown } | undefined)?.subscription;
  if (typeof id !== 'string') {
    throw new InvalidParamsError('Unsubscribe takes [subscriptionId] or { subscription }');
  }
  return id;
}
