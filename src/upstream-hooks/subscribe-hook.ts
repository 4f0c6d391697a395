import type { Logger } from '../peer/logger.js';
import { addressGroup } from '../server/address-group.js';
import type { Tracing } from '../tracing/tracing.js';
import { KeyedShares } from '../upstream/keyed-shares.js';
import type { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import { UpstreamError } from '../upstream/upstream-error.js';
import { userHeader } from '../upstream/identity-headers.js';
import { failureOf, isRefusal } from './hook-answers.js';
import type { HookMetrics } from './hook-metrics.js';
import type { SubscribeHookConfig } from './hooks-config.js';
import { tracedHookRequest } from './hook-call.js';

/** What a topic's `authorize` hook is asked (TopicOptions.authorize). */
export interface TopicRequest {
  /** The session subscribing (a gateway `Session` of any context type). */
  readonly session: {
    readonly id: string;
    readonly context: unknown;
    readonly isClosed?: boolean;
    /** The client's address, after trusted proxies; none (stdio, in-process): no address share. */
    readonly remoteAddress?: string | undefined;
  };
  readonly topic: string;
  readonly params: unknown;
  /**
   * True when a refresh weighs a subscription the session already holds again: such a check
   * waits for the hook's shares instead of being refused -32013, since a busy hook must not end
   * a subscription the new context still allows.
   */
  readonly refresh?: boolean;
}

/** Whether `topic` is one of `patterns` (exact names, or prefixes ending in `*`). */
export function matchesTopic(patterns: readonly string[], topic: string): boolean {
  return patterns.some((p) => (p.endsWith('*') ? topic.startsWith(p.slice(0, -1)) : p === topic));
}

/**
 * A topic `authorize` hook calling `wsrpc.subscribe` on the upstream for the topics its patterns
 * name (others are allowed without a call): `{ allow: true }` lets the subscribe through;
 * `{ allow: false }` or a -32004/-32010 error refuse it (-32004 to the client). Anything else,
 * or no answer in time, is a failure: refused (`onFailure: refuse`), or allowed. At most
 * `maxConcurrentPerSession` calls of one session are in flight; its other subscribes wait their
 * turn, at most `maxQueuedPerSession` of them (one more is refused -32013 whatever `onFailure`),
 * so one session's burst cannot take the upstream's maxConcurrent and fail everyone else's. The
 * sessions of one client address group hold at most `maxConcurrentPerAddress` calls together, so
 * neither can several connections from one address: past it, a session with a call of its own in
 * flight waits for it (in the same queue), one without is refused -32013 whatever `onFailure`. A
 * waiting subscribe whose session has closed is dropped unasked.
 *
 * A refresh's checks (`refresh: true`) are never refused busy: they wait in the session's queue
 * past `maxQueuedPerSession` (one refresh at a time per session, so they are at most its
 * subscriptions, which maxSubscriptions bounds), and when the address's share is full and the
 * session has no call of its own, the session waits in line for the next slot another session
 * of the address gives back (each session at most once, so the line is at most the address's
 * connections, which maxConnectionsPerIp bounds). A slot given back goes to the line before the
 * giving session's own queue, so a session in line waits for at most one slot per session ahead
 * of it, not for as long as other sessions keep their queues full.
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
  const perAddress = new KeyedShares(config.maxConcurrentPerAddress);
  // Per address group: sessions whose refresh waits for one of the address's slots, in order.
  const addressLines = new Map<string, Lane[]>();
  /** A lane into its address's line, to be admitted when a slot of the address comes back. */
  const joinLine = (lane: Lane, group: string): void => {
    const line = addressLines.get(group);
    if (line) line.push(lane);
    else addressLines.set(group, [lane]);
  };
  /**
   * The ending call's slots: to the first session waiting in the address's line, else to its own
   * session's next call, else free. The line goes first: were a session's own queue served
   * first, other sessions of the address that keep theirs full would hold every slot, and a
   * refresh waiting in line would wait for as long as they like. A session left with waiting
   * calls and none running takes its place in the line in turn.
   */
  const release = (lane: Lane): void => {
    const group = lane.group;
    const line = group === undefined ? undefined : addressLines.get(group);
    if (group === undefined || line === undefined) {
      if (lane.next() && group !== undefined) perAddress.give(group);
      return;
    }
    const heir = line.shift()!;
    if (line.length === 0) addressLines.delete(group);
    lane.running--;
    heir.admit();
    if (lane.running === 0 && lane.waiting.length > 0) joinLine(lane, group);
  };
  const lanes = new WeakMap<object, Lane>();
  const laneOf = (session: TopicRequest['session']): Lane => {
    let lane = lanes.get(session);
    if (!lane) {
      const address = session.remoteAddress;
      lanes.set(
        session,
        (lane = new Lane(address === undefined ? undefined : addressGroup(address))),
      );
    }
    return lane;
  };
  const busy = (reason: string, bound: string, limit: number): UpstreamError => {
    deps.metrics.outcome('subscribe', 'busy');
    return UpstreamError.busy(client.name, reason, bound, limit);
  };
  const ask = async (request: TopicRequest): Promise<boolean> => {
    const { session, topic, params } = request;
    const userOf = deps.userOf();
    const user =
      userOf && session.context !== undefined ? userOf(session.context as never) : undefined;
    let result: unknown;
    try {
      // In the try: a user no header can carry (a lone surrogate, or longer than
      // MAX_USER_HEADER_BYTES encoded, from an identity other than the connect hook's) is a
      // failure of the hook, decided by onFailure; the upstream is not asked.
      const headers: Record<string, string> = { 'x-wsrpc-session': session.id };
      if (typeof user === 'string') headers['x-wsrpc-user'] = userHeader(user, client.name);
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
  return async (request) => {
    if (!matchesTopic(config.topics, request.topic)) return true;
    const lane = laneOf(request.session);
    const group = lane.group;
    const addressFull = group !== undefined && perAddress.isFull(group);
    // Behind the session's waiting ones too, so its subscribes are asked in order.
    const queue =
      lane.running >= config.maxConcurrentPerSession ||
      lane.waiting.length > 0 ||
      (addressFull && lane.running > 0);
    if (queue) {
      if (request.refresh !== true && lane.waiting.length >= config.maxQueuedPerSession) {
        throw busy(
          `${config.maxQueuedPerSession} subscribes of this session waiting for the subscribe hook`,
          'maxQueuedPerSession',
          config.maxQueuedPerSession,
        );
      }
      await new Promise<void>((resolve) => lane.waiting.push(resolve));
      // The slots were handed over by the call that ended: `running` and the address's count
      // already count this one.
    } else if (addressFull && request.refresh === true) {
      // The session's other checks queue behind this one (its `waiting` is no longer empty).
      await new Promise<void>((resolve) => {
        lane.waiting.push(resolve);
        joinLine(lane, group);
      });
    } else if (addressFull) {
      // No call of its own to wait for: waiting would be on other sessions, unbounded in time.
      throw busy(
        `${config.maxConcurrentPerAddress} subscribe hook calls from this address in flight`,
        'maxConcurrentPerAddress',
        config.maxConcurrentPerAddress,
      );
    } else {
      lane.running++;
      if (group !== undefined) perAddress.take(group);
    }
    try {
      // Its session closed while it waited: nobody is left to subscribe.
      if (request.session.isClosed === true) return false;
      return await ask(request);
    } finally {
      release(lane);
    }
  };
}

/**
 * One session's subscribe hook calls: `running` in flight, the others `waiting` in order. An
 * ending call hands its slot (and its slot of the address's share) to the first waiting one, so
 * neither count drops between them.
 */
class Lane {
  running = 0;
  readonly waiting: (() => void)[] = [];

  /** `group`: the session's address group, if it has an address. */
  constructor(readonly group: string | undefined) {}

  /** Take a slot another session of the address handed over, for the first waiting call. */
  admit(): void {
    this.running++;
    this.waiting.shift()?.();
  }

  /** Hand the ending call's slot on; true when none was waiting and the slot is free. */
  next(): boolean {
    const wake = this.waiting.shift();
    if (wake) {
      wake();
      return false;
    }
    this.running--;
    return true;
  }
}
