import type { Logger } from '../peer/logger.js';
import type { Tracing } from '../tracing/tracing.js';
import type { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import { failureOf, isRefusal } from './hook-answers.js';
import type { HookMetrics } from './hook-metrics.js';
import type { SubscribeHookConfig } from './hooks-config.js';
import { tracedHookRequest } from './hook-call.js';

/** What a topic's `authorize` hook is asked (TopicOptions.authorize). */
export interface TopicRequest {
  /** The session subscribing (a gateway `Session` of any context type). */
  readonly session: { readonly id: string; readonly context: unknown };
  readonly topic: string;
  readonly params: unknown;
}

/** Whether `topic` is one of `patterns` (exact names, or prefixes ending in `*`). */
export function matchesTopic(patterns: readonly string[], topic: string): boolean {
  return patterns.some((p) => (p.endsWith('*') ? topic.startsWith(p.slice(0, -1)) : p === topic));
}

/**
 * A topic `authorize` hook calling `wsrpc.subscribe` on the upstream for the topics its patterns
 * name (others are allowed without a call): `{ allow: true }` lets the subscribe through;
 * `{ allow: false }` or a -32004/-32010 error refuse it (-32004 to the client). Anything else,
 * or no answer in time, is a failure: refused (`onFailure: refuse`), or allowed.
 */
export function subscribeHook(
  config: SubscribeHookConfig,
  client: JsonRpcHttpClient,
  deps: {
    logger: Logger;
    tracing: Tracing;
    metrics: HookMetrics;
    userOf: () => ((context: never) => string | undefined) | undefined;
    contextOf: (session: TopicRequest['session']) => unknown;
  },
): (request: TopicRequest) => boolean | Promise<boolean> {
  const failed = (why: Record<string, unknown>, topic: string): boolean => {
    deps.metrics.outcome('subscribe', 'failed');
    deps.logger.warn({ ...why, topic, onFailure: config.onFailure }, 'subscribe hook failed');
    return config.onFailure === 'allow';
  };
  const decided = (allow: boolean): boolean => {
    deps.metrics.outcome('subscribe', allow ? 'accepted' : 'refused');
    return allow;
  };
  return async ({ session, topic, params }) => {
    if (!matchesTopic(config.topics, topic)) return true;
    const userOf = deps.userOf();
    const user =
      userOf && session.context !== undefined ? userOf(session.context as never) : undefined;
    let result: unknown;
    try {
      // In the try: a user encodeURIComponent refuses (a lone surrogate, from an identity other
      // than the connect hook's) is a failure of the hook, decided by onFailure.
      const headers: Record<string, string> = { 'x-wsrpc-session': session.id };
      if (typeof user === 'string') headers['x-wsrpc-user'] = encodeURIComponent(user);
      result = await tracedHookRequest(
        deps.tracing,
        client,
        'wsrpc.subscribe',
        {
          sessionId: session.id,
          user: user ?? null,
          context: deps.contextOf(session) ?? null,
          topic,
          params: params ?? null,
        },
        { timeoutMs: config.timeoutMs, headers },
      );
    } catch (err) {
      if (isRefusal(err)) return decided(false);
      return failed(failureOf(err), topic);
    }
    const allow = (result as { allow?: unknown } | null)?.allow;
    if (typeof allow !== 'boolean')
      return failed({ reason: 'malformed result: no boolean allow' }, topic);
    return decided(allow);
  };
}
