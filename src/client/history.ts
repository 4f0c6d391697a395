// `client.history(topic, ...)`: a topic's retained messages on demand, through the gateway's
// `history` method (docs/pubsub.md "History and latest value").
import type { Params } from '../protocol/types.js';

/** Which part of a topic's history to read: the last `last` messages, or those after `since`. */
export interface HistoryOptions {
  /** The last this many messages (1 to 100). Without `last` or `since`: the last `limit`. */
  last?: number;
  /** The messages after this seq, oldest first (a seq from a message, `lastSeq` or a position). */
  since?: number;
  /** At most this many messages (1 to 100, the default). */
  limit?: number;
}

/** One page of a topic's history, oldest first. */
export interface HistoryResult<T = unknown> {
  messages: { seq: number; data: T }[];
  /** The topic's latest seq: more to read while the last message's seq is below it. */
  lastSeq: number;
  /** The numbering the seqs belong to, when the broker names it. */
  epoch?: string;
  /** History no longer holds some of what was asked (the topic's retention trimmed it). */
  truncated?: true;
}

/** Call the gateway's history method (`method`: the configured name) for `topic`. */
export function readHistory<T>(
  call: (method: string, params: Params) => Promise<unknown>,
  method: string,
  topic: string,
  options: HistoryOptions,
): Promise<HistoryResult<T>> {
  const params: Record<string, unknown> = { topic };
  if (options.last !== undefined) params['last'] = options.last;
  if (options.since !== undefined) params['since'] = options.since;
  if (options.limit !== undefined) params['limit'] = options.limit;
  return call(method, params) as Promise<HistoryResult<T>>;
}
