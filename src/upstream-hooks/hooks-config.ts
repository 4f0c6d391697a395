// The `hooks` section of a gateway-mode configuration file: which upstream decides connections
// (connect), subscriptions (subscribe) and hears lifecycle events (events), checked with the
// rules every option of the library uses; each refusal names its full path in the file.
import { checkOptions, isRecord, numberIn, oneOf, ofType, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import {
  defaultMaxConcurrentPerAddress,
  defaultMaxConcurrentPerSession,
  resolveUpstreamsConfig,
  upstreamBounds,
} from '../upstream/upstreams-config.js';
import type { HttpUpstreamConfig } from '../upstream/upstreams-config.js';

/** The longest delay a Node timer takes (2^31 - 1 ms). */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** The most an upstream's maxConcurrent may be (a per-client share is checked against its own). */
const MAX_CONCURRENT = upstreamBounds.maxConcurrent;

/** What a hook does when its upstream does not answer in time, or answers nonsense. */
export type OnFailure = 'refuse' | 'allow';

export const lifecycleEventTypes = ['connect', 'disconnect', 'subscribe', 'unsubscribe'] as const;
export type LifecycleEventType = (typeof lifecycleEventTypes)[number];

interface HookCommon {
  /** The upstream called (an HTTP one of the `upstreams` section). */
  readonly upstream: HttpUpstreamConfig;
  /** Per call; the upstream's `timeoutMs` unless given. */
  readonly timeoutMs: number;
}

export interface ConnectHookConfig extends HookCommon {
  readonly onFailure: OnFailure;
  /**
   * Hook calls in flight for one client address (IPv6: its /64); past it that address is
   * refused 429 with Retry-After, so one address cannot take the upstream's maxConcurrent.
   */
  readonly maxConcurrentPerAddress: number;
}

export interface SubscribeHookConfig extends HookCommon {
  readonly onFailure: OnFailure;
  /** Hook calls in flight for one session; its other subscribes wait their turn. */
  readonly maxConcurrentPerSession: number;
  /**
   * Hook calls in flight for all sessions from one client address (IPv6: its /64), at least
   * maxConcurrentPerSession; past it a session of that address with no call of its own in flight
   * is refused -32013, one with calls in flight waits its turn.
   */
  readonly maxConcurrentPerAddress: number;
  /** A session's subscribes waiting for their turn; one more is refused -32013. */
  readonly maxQueuedPerSession: number;
  /** Topic patterns (exact, or a prefix ending in `*`) the hook decides; the others are allowed. */
  readonly topics: readonly string[];
}

export interface EventsHookConfig extends HookCommon {
  readonly events: readonly LifecycleEventType[];
  /** Events waiting to be sent; beyond it the oldest is dropped (and counted). */
  readonly maxQueued: number;
  /** Times a batch the upstream did not take is sent again, with backoff, before it is dropped. */
  readonly retries: number;
  /** Events per `wsrpc.events` request. */
  readonly batchSize: number;
  /** A batch that is not full is sent this long after its first event. */
  readonly flushIntervalMs: number;
}

export interface HooksConfig {
  readonly connect?: ConnectHookConfig;
  readonly subscribe?: SubscribeHookConfig;
  readonly events?: EventsHookConfig;
}

export const hooksDefaults = Object.freeze({
  onFailure: 'refuse' as OnFailure,
  topics: Object.freeze(['*']) as readonly string[],
  events: lifecycleEventTypes as readonly LifecycleEventType[],
  maxQueued: 10_000,
  retries: 5,
  batchSize: 100,
  flushIntervalMs: 1_000,
  /** The subscribe hook's calls in flight per session (at most the upstream's maxConcurrent). */
  subscribeMaxConcurrentPerSession: 4,
  /** Above a session's in-flight subscribes (128) and its subscriptions (100) at a refresh. */
  subscribeMaxQueuedPerSession: 256,
});

export const hooksBounds = Object.freeze({
  maxQueued: 1_000_000,
  retries: 20,
  batchSize: 1_000,
  flushIntervalMs: 60_000,
  maxQueuedPerSession: 100_000,
});

const topicPatterns: Rule = (value, name) => {
  const what = 'an array of topic patterns (exact names, or prefixes ending in "*")';
  if (!Array.isArray(value)) refuse(name, what, value);
  value.forEach((pattern: unknown, i) => {
    const star = typeof pattern === 'string' ? pattern.indexOf('*') : -1;
    if (
      typeof pattern !== 'string' ||
      pattern === '' ||
      (star !== -1 && star !== pattern.length - 1)
    ) {
      refuse(`${name}[${i}]`, 'an exact topic name or a prefix ending in "*"', pattern);
    }
  });
};

const eventTypes: Rule = (value, name) => {
  if (!Array.isArray(value) || value.length === 0) {
    refuse(name, `a non-empty array of ${lifecycleEventTypes.join(', ')}`, value);
  }
  value.forEach((type: unknown, i) => oneOf(...lifecycleEventTypes)(type, `${name}[${i}]`));
};

const common: Record<string, Rule> = {
  upstream: ofType('string', 'the name of an upstream'),
  timeoutMs: numberIn(1, MAX_DELAY_MS, true),
};
const onFailure = oneOf('refuse', 'allow');

const rules = {
  connect: { ...common, onFailure, maxConcurrentPerAddress: numberIn(1, MAX_CONCURRENT, true) },
  subscribe: {
    ...common,
    onFailure,
    topics: topicPatterns,
    maxConcurrentPerSession: numberIn(1, MAX_CONCURRENT, true),
    maxConcurrentPerAddress: numberIn(1, MAX_CONCURRENT, true),
    maxQueuedPerSession: numberIn(0, hooksBounds.maxQueuedPerSession, true),
  },
  events: {
    ...common,
    events: eventTypes,
    maxQueued: numberIn(1, hooksBounds.maxQueued, true),
    retries: numberIn(0, hooksBounds.retries, true),
    batchSize: numberIn(1, hooksBounds.batchSize, true),
    flushIntervalMs: numberIn(10, hooksBounds.flushIntervalMs, true),
  },
} satisfies Record<keyof HooksConfig, Record<string, Rule>>;

/**
 * Check and resolve the `hooks` section of a configuration file. Takes the whole file (as
 * resolveUpstreamsConfig does): each hook names an HTTP upstream of its `upstreams` section.
 * A file without `hooks` resolves to no hooks.
 */
export function resolveHooksConfig(file: unknown): HooksConfig {
  if (!isRecord(file)) refuse('the configuration', 'an object', file);
  const section = file['hooks'];
  if (section === undefined) return Object.freeze({});
  if (!isRecord(section)) refuse('hooks', 'an object ({ connect, subscribe, events })', section);
  const given = checkOptions(
    section,
    { connect: null, subscribe: null, events: null },
    'hooks.',
    'hooks',
  );
  const upstreams = resolveUpstreamsConfig({ upstreams: file['upstreams'] }).upstreams;
  const resolved: { -readonly [K in keyof HooksConfig]: HooksConfig[K] } = {};
  for (const hook of ['connect', 'subscribe', 'events'] as const) {
    if (given[hook] === undefined) continue;
    const path = `hooks.${hook}`;
    if (!isRecord(given[hook])) refuse(path, 'an object ({ upstream, ... })', given[hook]);
    const options = checkOptions(given[hook], rules[hook], `${path}.`, path);
    const name = options['upstream'];
    if (name === undefined) throw new TypeError(`${path}.upstream is required`);
    const upstream = upstreams.get(name as string);
    if (upstream === undefined || upstream.kind !== 'http') {
      const known = [...upstreams.values()]
        .filter((u) => u.kind === 'http')
        .map((u) => `"${u.name}"`);
      // A NATS upstream is declared but cannot take a hook: said so, not "none is declared".
      const natsOne = upstream === undefined ? '' : ` (${JSON.stringify(name)} is a NATS upstream)`;
      throw new RangeError(
        `${path}.upstream must name an HTTP upstream (${known.join(', ') || 'no HTTP upstream is declared'}), not ${JSON.stringify(name)}${natsOne}`,
      );
    }
    const base = {
      upstream,
      timeoutMs: (options['timeoutMs'] as number | undefined) ?? upstream.timeoutMs,
    };
    if (hook === 'events') {
      resolved.events = Object.freeze({
        ...base,
        events: Object.freeze([
          ...new Set(
            (options['events'] as LifecycleEventType[] | undefined) ?? hooksDefaults.events,
          ),
        ]),
        maxQueued: (options['maxQueued'] as number | undefined) ?? hooksDefaults.maxQueued,
        retries: (options['retries'] as number | undefined) ?? hooksDefaults.retries,
        batchSize: (options['batchSize'] as number | undefined) ?? hooksDefaults.batchSize,
        flushIntervalMs:
          (options['flushIntervalMs'] as number | undefined) ?? hooksDefaults.flushIntervalMs,
      });
    } else {
      const failure = (options['onFailure'] as OnFailure | undefined) ?? hooksDefaults.onFailure;
      const share = (key: string, fallback: number): number =>
        withinUpstream(`${path}.${key}`, options[key] as number | undefined, upstream) ?? fallback;
      if (hook === 'connect') {
        resolved.connect = Object.freeze({
          ...base,
          onFailure: failure,
          maxConcurrentPerAddress: share(
            'maxConcurrentPerAddress',
            defaultMaxConcurrentPerSession(upstream.maxConcurrent),
          ),
        });
      } else {
        const topics = (options['topics'] as string[] | undefined) ?? hooksDefaults.topics;
        const perAddress = withinUpstream(
          `${path}.maxConcurrentPerAddress`,
          options['maxConcurrentPerAddress'] as number | undefined,
          upstream,
        );
        const perSession = share(
          'maxConcurrentPerSession',
          Math.min(
            hooksDefaults.subscribeMaxConcurrentPerSession,
            perAddress ?? upstream.maxConcurrent,
          ),
        );
        if (perAddress !== undefined && perSession > perAddress) {
          throw new RangeError(
            `${path}.maxConcurrentPerSession must be at most ${path}.maxConcurrentPerAddress (${perAddress}), not ${perSession}`,
          );
        }
        resolved.subscribe = Object.freeze({
          ...base,
          onFailure: failure,
          topics: Object.freeze([...topics]),
          maxConcurrentPerSession: perSession,
          maxConcurrentPerAddress:
            perAddress ?? defaultMaxConcurrentPerAddress(upstream.maxConcurrent, perSession),
          maxQueuedPerSession:
            (options['maxQueuedPerSession'] as number | undefined) ??
            hooksDefaults.subscribeMaxQueuedPerSession,
        });
      }
    }
  }
  return Object.freeze(resolved);
}

/** A per-client share of the hook's upstream, which cannot be more than its maxConcurrent. */
function withinUpstream(
  path: string,
  value: number | undefined,
  upstream: HttpUpstreamConfig,
): number | undefined {
  if (value !== undefined && value > upstream.maxConcurrent) {
    throw new RangeError(
      `${path} must be at most the maxConcurrent of upstream "${upstream.name}" (${upstream.maxConcurrent}), not ${value}`,
    );
  }
  return value;
}
