import { InvalidParamsError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';

export interface SubscribeRequest {
  /** Topic or stream name. */
  name: string;
  /** Parameters for a per-subscriber stream (or for the topic's authorize hook). */
  params: unknown;
}

/**
 * Read the subscribe method's params. Positional, as Ethereum clients send
 * them: `["newHeads"]`, `["logs", {...}]`; or named: `{ "topic": "...", "params": ... }`.
 */
export function readSubscribeParams(params: Params | undefined): SubscribeRequest {
  if (Array.isArray(params)) {
    const [name, extra] = params as unknown[];
    if (typeof name === 'string' && name.length > 0) return { name, params: extra };
  } else if (params) {
    const { topic, params: extra } = params as { topic?: unknown; params?: unknown };
    if (typeof topic === 'string' && topic.length > 0) return { name: topic, params: extra };
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
