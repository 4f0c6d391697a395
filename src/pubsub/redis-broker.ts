import { createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { defaultRetention } from './broker.js';
import type { Broker, BrokerMessage, History, Retention } from './broker.js';

/** Options of {@link RedisBroker}. */
export interface RedisBrokerOptions {
  /** `redis[s]://[[user]:password@]host[:port][/db]`. */
  url: string;
  /** Prepended to every key and channel. Default `wsrpc:`. */
  prefix?: string;
  /**
   * A command (publish, history, catch-up reads) that gets no reply within this many
   * milliseconds rejects. Default 2 000.
   */
  commandTimeoutMs?: number;
  /** Give up one connection attempt after this many milliseconds. Default 5 000. */
  connectTimeoutMs?: number;
  /** Reconnect attempts back off linearly (100 ms per attempt) up to this. Default 2 000. */
  reconnectMaxDelayMs?: number;
  /**
   * Connection errors, failed catch-up reads and exceptions thrown by `deliver`.
   * They never propagate: the broker reports them here and carries on. Default: ignored.
   */
  onError?: (error: Error) => void;
}

/** The Redis keys and channel of one topic. */
export interface RedisTopicKeys {
  /**
   * Hash: `n` the topic's latest seq, `e` the topic's epoch (see {@link RedisBroker}), `a` the
   * history age limit in ms of the last publish (-1: none), which reads apply too.
   */
  meta: string;
  /** Stream: the retained messages, id `<seq>-0`, fields `t` (server ms) and `p` (payload). */
  log: string;
  /** Pub/sub channel: `<epoch>:<seq>:<payload>` for every publish. */
  channel: string;
}

/**
 * Where a topic lives under `prefix`. The topic is wrapped in a hash tag so that both
 * keys share one cluster slot, as the publish script needs.
 */
export function redisTopicKeys(prefix: string, topic: string): RedisTopicKeys {
  const base = `${prefix}{${topic}}`;
  return { meta: `${base}:meta`, log: `${base}:log`, channel: `${base}:live` };
}

// KEYS: meta, log. ARGV: channel, payload, maxLength (-1: none), maxAgeMs (-1: none), new epoch.
// Returns the message's seq. Everything happens in one script, so seq order is the order of
// the stream and of the PUBLISHes that every subscriber sees.
const PUBLISH_LUA = `
local meta, log = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'e')
if not epoch then
  epoch = ARGV[5]
  redis.call('DEL', log)
  redis.call('HSET', meta, 'e', epoch, 'n', 0)
end
local seq = redis.call('HINCRBY', meta, 'n', 1)
redis.call('HSET', meta, 'a', ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local id = string.format('%d-0', seq)
local maxLength = tonumber(ARGV[3])
local maxAge = tonumber(ARGV[4])
if maxLength >= 0 then
  redis.call('XADD', log, 'MAXLEN', maxLength, id, 't', string.format('%d', now), 'p', ARGV[2])
else
  redis.call('XADD', log, id, 't', string.format('%d', now), 'p', ARGV[2])
end
if maxAge >= 0 then
  local cutoff = now - maxAge
  local start, count, keep, seen = '-', 1, nil, false
  while not keep do
    local batch = redis.call('XRANGE', log, start, '+', 'COUNT', count)
    if #batch == 0 then break end
    seen = true
    for i = 1, #batch do
      if tonumber(batch[i][2][2]) >= cutoff then
        keep = batch[i][1]
        break
      end
    end
    start = '(' .. batch[#batch][1]
    count = 100
  end
  if keep then
    redis.call('XTRIM', log, 'MINID', keep)
  elseif seen then
    redis.call('XTRIM', log, 'MAXLEN', 0)
  end
  redis.call('PEXPIRE', log, math.max(maxAge, 1))
else
  redis.call('PERSIST', log)
end
redis.call('PUBLISH', ARGV[1], epoch .. ':' .. string.format('%d', seq) .. ':' .. ARGV[2])
return seq
`;

// KEYS: meta, log. ARGV: first id, last id ('+' for the end), COUNT (0: all).
// Returns { latest seq, epoch ('' when the topic does not exist), entries }, read atomically.
// Entries older than the topic's age limit (meta `a`, set by each publish) are left out: a
// publish trims them, but between publishes they would otherwise still be read.
const HISTORY_LUA = `
local state = redis.call('HMGET', KEYS[1], 'n', 'e', 'a')
if not state[2] then return {0, '', {}} end
local first, last = ARGV[1], ARGV[2]
local maxAge = tonumber(state[3])
if maxAge and maxAge >= 0 then
  local time = redis.call('TIME')
  local cutoff = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - maxAge
  -- Entries are in publish order, so the expired ones come first: start after them.
  while true do
    local batch = redis.call('XRANGE', KEYS[2], first, last, 'COUNT', 100)
    if #batch == 0 then return {tonumber(state[1]), state[2], {}} end
    local keep
    for i = 1, #batch do
      if tonumber(batch[i][2][2]) >= cutoff then
        keep = batch[i][1]
        break
      end
    end
    if keep then
      first = keep
      break
    end
    first = '(' .. batch[#batch][1]
  end
end
local entries
if tonumber(ARGV[3]) > 0 then
  entries = redis.call('XRANGE', KEYS[2], first, last, 'COUNT', ARGV[3])
else
  entries = redis.call('XRANGE', KEYS[2], first, last)
end
return {tonumber(state[1]), state[2], entries}
`;

interface Script {
  lua: string;
  sha: string;
}

function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

const publishScript = script(PUBLISH_LUA);
const historyScript = script(HISTORY_LUA);

/** One read of a topic: its epoch ('' when it does not exist), latest seq and entries. */
interface Read {
  epoch: string;
  lastSeq: number;
  messages: BrokerMessage[];
}

interface TopicState {
  readonly topic: string;
  readonly keys: RedisTopicKeys;
  deliver: (message: BrokerMessage) => void;
  /** The epoch `lastSeq` belongs to; '' before the topic exists. */
  epoch: string;
  /** The last seq delivered (or skipped as before the subscription). */
  lastSeq: number;
  /** Work on this topic (live messages, catch-up) runs one item at a time, in order. */
  chain: Promise<void>;
  /** Settles once the SUBSCRIBE is in place. */
  subscribed: Promise<void>;
  /** Set once `epoch` and `lastSeq` hold the starting point; reconnects leave it alone before. */
  started: boolean;
  retryTimer: NodeJS.Timeout | undefined;
}

const CATCH_UP_BATCH = 512;
const RETRY_CATCH_UP_MS = 1_000;
const CLOSE_TIMEOUT_MS = 2_000;

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function describeTarget(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '6379'}`;
  } catch {
    return 'redis';
  }
}

/**
 * A {@link Broker} on Redis (6.2 or later, for `XTRIM MINID`; tested on 7), so that gateway
 * nodes sharing one Redis share one topic space.
 *
 * ```ts
 * const broker = await RedisBroker.create({ url: 'redis://127.0.0.1:6379' });
 * // or: const broker = new RedisBroker({ url }); await broker.connect();
 * ```
 *
 * Per topic (see {@link redisTopicKeys}): a hash holding the latest seq and an epoch, a
 * stream holding the retained messages under id `<seq>-0`, and a channel. One Lua script
 * increments the seq, appends to the stream, trims it and PUBLISHes `<epoch>:<seq>:<payload>`,
 * so every node sees the same contiguous seqs in the same order. Subscribers remember the last
 * seq delivered per topic: a live message past a gap is preceded by the missing ones read from
 * the stream, duplicates are dropped, and after a reconnect every topic is resubscribed and
 * caught up from the stream (as far as retention reaches).
 *
 * The epoch is a random id created with a topic's hash. When Redis loses the topic (a restart
 * without persistence, a flush, an eviction) the next publish starts a new epoch at seq 1 and
 * clears the old stream; subscribers seeing a new epoch restart their count, and history no
 * longer holds the messages from before: Redis without persistence loses history across a
 * restart. A Redis restored from an older snapshot (same epoch, lower seq) hands out the lost
 * seqs again; subscribers rewind to the then-current seq when they catch up after the
 * reconnect, and may miss what was published on the restored Redis before that catch-up.
 *
 * Retention is applied on publish: the stream is trimmed exactly (not `~`) to `maxLength`,
 * which costs one entry removed per publish once a topic is full; entries older
 * than `maxAgeMs` (by the Redis server's clock) are trimmed from its head, and the stream key
 * expires `maxAgeMs` after the last publish. Reads (history, catch-up) leave out entries older
 * than the topic's `maxAgeMs` too (the last publish's, kept in the meta hash), so a message
 * past its age is not replayed between two publishes either. The seq hash is kept forever (one
 * small hash per topic ever published), so seqs never restart while Redis keeps its data.
 *
 * Scripts run with EVALSHA; after Redis lost its script cache (a restart, SCRIPT FLUSH) the
 * calls that fail with NOSCRIPT are sent again as EVAL, and later calls wait until they have
 * been, so one node's publishes still run in the order they were made.
 *
 * Faults: while the command connection is down `ready` is false and publish, subscribe and
 * history reject at once with "Redis broker unavailable"; a command that gets no reply within
 * `commandTimeoutMs` rejects too (a publish that timed out may still have been stored). Both
 * connections reconnect by themselves. Errors are reported to `onError`, never thrown from
 * event handlers.
 */
/** Topics starting with `$` carry messages addressed to a node or a user (see SessionRouter). */
function isDirect(topic: string): boolean {
  return topic.startsWith('$');
}

export class RedisBroker implements Broker {
  private readonly prefix: string;
  private readonly target: string;
  private readonly onError: (error: Error) => void;
  private readonly command: Redis;
  private readonly subscriber: Redis;
  private readonly topics = new Map<string, TopicState>();
  private readonly channels = new Map<string, string>();
  /** `$`-topics (messages addressed to a node or user): plain channels, no history. */
  private readonly direct = new Map<
    string,
    { topic: string; deliver: (message: BrokerMessage) => void }
  >();
  private readonly connectTimeoutMs: number;
  private closed = false;
  private closing: Promise<void> | undefined;
  private lastError: Error | undefined;
  /** Script calls sent and not yet answered (or, after NOSCRIPT, not yet sent again as EVAL). */
  private scriptCalls = 0;
  /** Set from a NOSCRIPT reply until every earlier call is settled: new calls wait for it. */
  private scriptRecovery: { done: Promise<void>; release: () => void } | undefined;

  /** Connects in the background; `connect()` waits for it. Never throws for network reasons. */
  constructor(options: RedisBrokerOptions) {
    this.prefix = options.prefix ?? 'wsrpc:';
    this.target = describeTarget(options.url);
    const onError = options.onError;
    this.onError = (error) => {
      if (!onError) return;
      try {
        onError(error);
      } catch {
        // A throwing error handler must not take the broker down.
      }
    };
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    const reconnectMaxDelayMs = options.reconnectMaxDelayMs ?? 2_000;
    const common: RedisOptions = {
      commandTimeout: options.commandTimeoutMs ?? 2_000,
      connectTimeout: this.connectTimeoutMs,
      retryStrategy: (attempt) => Math.min(attempt * 100, reconnectMaxDelayMs),
      // Reject at once rather than queue while disconnected, and never resend a command whose
      // reply was lost: a resent publish could be stored twice.
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      // Resubscription is done here, so that catch-up starts once it is in place.
      autoResubscribe: false,
    };
    this.command = new Redis(options.url, { ...common, connectionName: 'wsrpc-broker' });
    this.subscriber = new Redis(options.url, { ...common, connectionName: 'wsrpc-broker-sub' });

    const reportError = (error: Error): void => {
      this.lastError = error;
      this.onError(error);
    };
    this.command.on('error', reportError);
    this.subscriber.on('error', reportError);
    this.command.on('ready', () => {
      // Anything that failed to catch up while the command connection was down tries again.
      if (this.subscriber.status !== 'ready') return;
      for (const state of this.topics.values()) if (state.started) this.catchUp(state);
    });
    this.subscriber.on('ready', () => {
      this.resubscribe().catch((error: unknown) => this.onError(toError(error)));
    });
    this.subscriber.on('message', (channel: string, message: string) => {
      try {
        this.onLive(channel, message);
      } catch (error) {
        this.onError(toError(error));
      }
    });
  }

  /**
   * Create a broker and wait until both of its connections are up.
   * Rejects (and closes the broker) when Redis cannot be reached within `connectTimeoutMs`.
   */
  static async create(options: RedisBrokerOptions): Promise<RedisBroker> {
    const broker = new RedisBroker(options);
    try {
      await broker.connect();
    } catch (error) {
      await broker.close();
      throw error;
    }
    return broker;
  }

  /**
   * Wait until both connections are up (`ready`). Rejects with a "Redis broker unavailable"
   * error after `timeoutMs` (default `connectTimeoutMs`); the broker keeps trying regardless.
   */
  async connect(timeoutMs = this.connectTimeoutMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.waitReady(this.command, deadline);
    await this.waitReady(this.subscriber, deadline);
  }

  get ready(): boolean {
    return !this.closed && this.command.status === 'ready';
  }

  async publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
  ): Promise<number> {
    this.assertUsable();
    if (isDirect(topic)) {
      // Addressed to a node or user: a plain channel message, no counter or stream to keep.
      await this.command.publish(this.directChannel(topic), payload);
      return 0;
    }
    const keys = redisTopicKeys(this.prefix, topic);
    const maxLength = Number.isFinite(retention.maxLength)
      ? Math.max(0, Math.floor(retention.maxLength))
      : -1;
    const maxAgeMs = Number.isFinite(retention.maxAgeMs)
      ? Math.max(0, Math.floor(retention.maxAgeMs))
      : -1;
    const seq = await this.evalScript(
      publishScript,
      [keys.meta, keys.log],
      [keys.channel, payload, String(maxLength), String(maxAgeMs), randomBytes(8).toString('hex')],
    );
    if (typeof seq !== 'number') throw new Error(`Redis broker: unexpected publish reply`);
    return seq;
  }

  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    this.assertUsable();
    if (isDirect(topic)) {
      if (this.subscriber.status !== 'ready') throw this.unavailable();
      const channel = this.directChannel(topic);
      const entry = { topic, deliver };
      this.direct.set(channel, entry);
      try {
        await this.subscriber.subscribe(channel);
      } catch (error) {
        // Not kept for resubscription; the SUBSCRIBE may have run all the same, so undo it.
        if (this.direct.get(channel) === entry) {
          this.direct.delete(channel);
          this.subscriber.unsubscribe(channel).catch(() => undefined);
        }
        throw error;
      }
      return;
    }
    const existing = this.topics.get(topic);
    if (existing) {
      existing.deliver = deliver;
      return existing.subscribed;
    }
    if (this.subscriber.status !== 'ready') throw this.unavailable();
    const keys = redisTopicKeys(this.prefix, topic);
    const state: TopicState = {
      topic,
      keys,
      deliver,
      epoch: '',
      lastSeq: 0,
      chain: Promise.resolve(),
      subscribed: Promise.resolve(),
      started: false,
      retryTimer: undefined,
    };
    state.subscribed = this.startSubscription(state);
    this.topics.set(topic, state);
    this.channels.set(keys.channel, topic);
    try {
      await state.subscribed;
    } catch (error) {
      if (this.topics.get(topic) === state) this.forget(state);
      throw error;
    }
  }

  async unsubscribe(topic: string): Promise<void> {
    if (isDirect(topic)) {
      const channel = this.directChannel(topic);
      if (!this.direct.delete(channel) || this.subscriber.status !== 'ready') return;
      await this.subscriber
        .unsubscribe(channel)
        .catch((error: unknown) => this.onError(toError(error)));
      return;
    }
    const state = this.topics.get(topic);
    if (!state) return;
    this.forget(state);
    if (this.subscriber.status !== 'ready') return; // not resubscribed after a reconnect anyway
    try {
      await this.subscriber.unsubscribe(state.keys.channel);
    } catch (error) {
      this.onError(toError(error));
    }
  }

  async history(topic: string, afterSeq: number): Promise<History> {
    this.assertUsable();
    const read = await this.read(redisTopicKeys(this.prefix, topic), topic, afterSeq, '+', 0);
    const history: History = { messages: read.messages, lastSeq: read.lastSeq };
    if (read.epoch !== '') history.epoch = read.epoch;
    return history;
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const state of [...this.topics.values()]) this.forget(state);
    const quit = async (client: Redis): Promise<void> => {
      if (client.status !== 'ready') return;
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          client.quit(),
          new Promise((resolve) => {
            timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
          }),
        ]);
      } catch {
        // Closing anyway.
      } finally {
        clearTimeout(timer);
      }
    };
    await Promise.all([quit(this.command), quit(this.subscriber)]);
    // Stops any reconnect in progress and drops a connection that did not quit in time.
    this.command.disconnect();
    this.subscriber.disconnect();
  }

  private assertUsable(): void {
    if (this.closed) throw new Error('Redis broker closed');
    if (this.command.status !== 'ready') throw this.unavailable();
  }

  private unavailable(cause?: unknown): Error {
    const reason = cause ?? this.lastError;
    const detail = reason === undefined ? 'not connected' : toError(reason).message;
    return new Error(
      `Redis broker unavailable (${this.target}): ${detail}`,
      reason === undefined ? undefined : { cause: reason },
    );
  }

  private waitReady(client: Redis, deadline: number): Promise<void> {
    if (this.closed) return Promise.reject(new Error('Redis broker closed'));
    if (client.status === 'ready') return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(
        () => {
          client.off('ready', onReady);
          reject(this.unavailable());
        },
        Math.max(0, deadline - Date.now()),
      );
      client.once('ready', onReady);
    });
  }

  /**
   * EVALSHA, falling back to EVAL when Redis does not have the script (yet, or any more: a
   * restart, SCRIPT FLUSH), without reordering: once a call fails with NOSCRIPT, later calls
   * wait until every call sent before that failure has been answered or sent again as EVAL,
   * so they reach Redis after those EVALs, in the order they were made.
   */
  private async evalScript(which: Script, keys: string[], args: string[]): Promise<unknown> {
    while (this.scriptRecovery) await this.scriptRecovery.done;
    this.scriptCalls++;
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      if (--this.scriptCalls === 0 && this.scriptRecovery) {
        this.scriptRecovery.release();
        this.scriptRecovery = undefined;
      }
    };
    try {
      let reply: Promise<unknown>;
      try {
        reply = Promise.resolve(
          await this.command.evalsha(which.sha, keys.length, ...keys, ...args),
        );
      } catch (error) {
        if (!toError(error).message.startsWith('NOSCRIPT')) throw error;
        this.startScriptRecovery();
        // Sent now, before this call counts as settled: later calls go after it.
        reply = this.command.eval(which.lua, keys.length, ...keys, ...args);
      }
      settle();
      return await reply;
    } catch (error) {
      const err = toError(error);
      // An error reply from Redis itself (OOM, WRONGTYPE, ...) is not an outage.
      if (err.name === 'ReplyError')
        throw new Error(`Redis broker: ${err.message}`, { cause: error });
      throw this.unavailable(err);
    } finally {
      settle();
    }
  }

  private startScriptRecovery(): void {
    if (this.scriptRecovery) return;
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    this.scriptRecovery = { done, release };
  }

  /** Messages after `afterSeq` up to `toId`, with the topic's epoch and latest seq, atomically. */
  private async read(
    keys: RedisTopicKeys,
    topic: string,
    afterSeq: number,
    toId: string,
    count: number,
  ): Promise<Read> {
    const after = Number.isFinite(afterSeq) ? Math.max(0, Math.floor(afterSeq)) : 0;
    const reply = await this.evalScript(
      historyScript,
      [keys.meta, keys.log],
      [`${after + 1}-0`, toId, String(count)],
    );
    if (!Array.isArray(reply) || reply.length !== 3) {
      throw new Error('Redis broker: unexpected history reply');
    }
    const [lastSeq, epoch, entries] = reply as [unknown, unknown, unknown];
    const messages: BrokerMessage[] = [];
    if (Array.isArray(entries)) {
      for (const entry of entries as unknown[]) {
        const message = parseEntry(topic, entry);
        if (message) messages.push(message);
      }
    }
    return {
      lastSeq: typeof lastSeq === 'number' ? lastSeq : Number(lastSeq),
      epoch: typeof epoch === 'string' ? epoch : '',
      messages,
    };
  }

  /**
   * Take the topic's current seq as the starting point, SUBSCRIBE, then catch up on what was
   * published in between: every message published after `subscribe` was called is delivered.
   */
  private async startSubscription(state: TopicState): Promise<void> {
    const start = await this.read(state.keys, state.topic, Number.MAX_SAFE_INTEGER, '+', 1);
    state.epoch = start.epoch;
    state.lastSeq = start.lastSeq;
    state.started = true;
    try {
      await this.subscriber.subscribe(state.keys.channel);
    } catch (error) {
      throw this.unavailable(error);
    }
    if (this.topics.get(state.topic) !== state) {
      // Unsubscribed while subscribing: drop the channel unless a newer subscription owns it.
      if (!this.topics.has(state.topic)) {
        this.subscriber.unsubscribe(state.keys.channel).catch(() => undefined);
      }
      return;
    }
    this.catchUp(state);
  }

  private forget(state: TopicState): void {
    clearTimeout(state.retryTimer);
    state.retryTimer = undefined;
    if (this.topics.get(state.topic) === state) {
      this.topics.delete(state.topic);
      this.channels.delete(state.keys.channel);
    }
  }

  private isCurrent(state: TopicState): boolean {
    return !this.closed && this.topics.get(state.topic) === state;
  }

  private enqueue(state: TopicState, work: () => Promise<void> | void): void {
    state.chain = state.chain
      .then(() => (this.isCurrent(state) ? work() : undefined))
      .catch((error: unknown) => this.onError(toError(error)));
  }

  private directChannel(topic: string): string {
    return `${this.prefix}direct:${topic}`;
  }

  private async resubscribe(): Promise<void> {
    if (this.direct.size > 0 && !this.closed)
      await this.subscriber.subscribe(...this.direct.keys());
    const states = [...this.topics.values()].filter((state) => state.started);
    if (states.length === 0 || this.closed) return;
    await this.subscriber.subscribe(...states.map((state) => state.keys.channel));
    for (const state of states) this.catchUp(state);
  }

  private onLive(channel: string, message: string): void {
    const direct = this.direct.get(channel);
    if (direct) {
      direct.deliver({ topic: direct.topic, seq: 0, payload: message });
      return;
    }
    const topic = this.channels.get(channel);
    const state = topic === undefined ? undefined : this.topics.get(topic);
    if (!state?.started) return;
    const first = message.indexOf(':');
    const second = first < 0 ? -1 : message.indexOf(':', first + 1);
    if (second < 0) return;
    const epoch = message.slice(0, first);
    const seq = Number(message.slice(first + 1, second));
    if (!Number.isSafeInteger(seq) || seq < 1) return;
    const payload = message.slice(second + 1);
    this.enqueue(state, () => this.live(state, epoch, seq, payload));
  }

  private async live(
    state: TopicState,
    epoch: string,
    seq: number,
    payload: string,
  ): Promise<void> {
    if (epoch !== state.epoch) {
      // A new epoch: the topic was lost by Redis and started again at seq 1.
      if (state.epoch !== '') state.lastSeq = 0;
      state.epoch = epoch;
    }
    if (seq <= state.lastSeq) return; // already delivered (from the stream)
    if (seq > state.lastSeq + 1) {
      // Missed messages (a reconnect): deliver them from the stream first.
      let read: Read;
      try {
        read = await this.read(state.keys, state.topic, state.lastSeq, `${seq - 1}-0`, 0);
      } catch (error) {
        // This message is in the stream too: the retry reads it from there.
        this.onError(toError(error));
        this.scheduleRetry(state);
        return;
      }
      if (!this.isCurrent(state)) return;
      if (read.epoch !== state.epoch) {
        this.catchUp(state);
        return;
      }
      for (const message of read.messages) this.emit(state, message.seq, message.payload);
    }
    this.emit(state, seq, payload);
  }

  /** Deliver, in order, what the stream holds after the last delivered seq. */
  private catchUp(state: TopicState): void {
    this.enqueue(state, async () => {
      clearTimeout(state.retryTimer);
      state.retryTimer = undefined;
      try {
        for (;;) {
          const read = await this.read(state.keys, state.topic, state.lastSeq, '+', CATCH_UP_BATCH);
          if (!this.isCurrent(state)) return;
          if (read.epoch !== state.epoch) {
            const restarted = state.epoch !== '';
            state.epoch = read.epoch;
            if (restarted) {
              state.lastSeq = 0;
              continue;
            }
          }
          if (read.lastSeq < state.lastSeq) {
            // Same epoch but an older seq: Redis came back from an older snapshot.
            state.lastSeq = read.lastSeq;
            return;
          }
          for (const message of read.messages) this.emit(state, message.seq, message.payload);
          if (read.messages.length < CATCH_UP_BATCH) return;
        }
      } catch (error) {
        this.onError(toError(error));
        this.scheduleRetry(state);
      }
    });
  }

  private scheduleRetry(state: TopicState): void {
    if (state.retryTimer || !this.isCurrent(state)) return;
    state.retryTimer = setTimeout(() => {
      state.retryTimer = undefined;
      if (this.isCurrent(state)) this.catchUp(state);
    }, RETRY_CATCH_UP_MS);
    state.retryTimer.unref();
  }

  private emit(state: TopicState, seq: number, payload: string): void {
    if (seq <= state.lastSeq || !this.isCurrent(state)) return;
    state.lastSeq = seq;
    try {
      state.deliver({ topic: state.topic, seq, payload, epoch: state.epoch || undefined });
    } catch (error) {
      this.onError(toError(error));
    }
  }
}

function parseEntry(topic: string, entry: unknown): BrokerMessage | undefined {
  if (!Array.isArray(entry) || entry.length < 2) return undefined;
  const [id, fields] = entry as [unknown, unknown];
  if (typeof id !== 'string' || !Array.isArray(fields)) return undefined;
  const seq = Number(id.slice(0, id.indexOf('-')));
  if (!Number.isSafeInteger(seq)) return undefined;
  const list = fields as unknown[];
  for (let i = 0; i + 1 < list.length; i += 2) {
    if (list[i] === 'p') {
      const payload = list[i + 1];
      if (typeof payload === 'string') return { topic, seq, payload };
    }
  }
  return undefined;
}
