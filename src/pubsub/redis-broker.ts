import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import {
  PublishUnconfirmedError,
  TopicCreationLimitError,
  defaultRetention,
  pageLimit,
} from './broker.js';
import type { Broker, BrokerMessage, History, OnceResult, Retention } from './broker.js';
import { CreationBudget } from './creation-budget.js';
import type { TopicCreationBudget } from './creation-budget.js';
import type { Denial } from './deny-list.js';
import { RedisDenyList } from './deny-list-redis.js';
import { RedisSessionDenyList } from './session-deny-list-redis.js';
import type { SessionDenial } from './session-deny-list.js';
import { HealthCheck } from './health-check.js';
import { RedisPresenceStore } from './presence-redis.js';
import { RedisDirectChannels } from './redis-direct.js';
import { describeTarget, mayHaveRun, toError, unavailableError } from './redis-errors.js';
import { isDirect, redisOnceKey, redisTopicKeys } from './redis-keys.js';
import { RedisScriptRunner } from './redis-script-runner.js';
import { DEFAULT_IDLE_TOPIC_TTL_MS, publishToTopic, readTopic } from './redis-scripts.js';
import type { OnceKey, Published, SeenSeq } from './redis-scripts.js';
import { RedisTopicSubscriptions } from './redis-topic-subscriptions.js';

/** The first wait before a failed resubscribe is tried again; it doubles each time, to the max. */
const RESUBSCRIBE_RETRY_MS = 100;
const RESUBSCRIBE_RETRY_MAX_MS = 5_000;

export { redisTopicKeys } from './redis-keys.js';
export type { RedisTopicKeys } from './redis-keys.js';

/** Options of {@link RedisBroker}. */
export interface RedisBrokerOptions extends TopicCreationBudget {
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
   * PING Redis this often (ms) while connected; two checks in a row without an answer within
   * `commandTimeoutMs` make `ready` false (a Redis that hangs with its connection up), until
   * one is answered. 0 turns the check off. Default 2 000.
   */
  healthCheckIntervalMs?: number;
  /**
   * Revoked sessions (revokeSession of another node's session) kept at most per node, in a
   * sorted set per node; a revocation beyond it, with none lapsed, is refused. Default 100 000.
   */
  maxDeniedSessions?: number;
  /**
   * How long a topic's count and epoch (its meta key) are kept after its history's age limit
   * (`maxAgeMs`), from its last publish: a topic published to again within it goes on with its
   * numbering; later, Redis has forgotten it (its next publish starts a new numbering, and a
   * resume from before gets `gap: null`, as after Redis lost a topic). A topic whose history
   * has no age limit keeps its key. Default 7 days.
   */
  idleTopicTtlMs?: number;
  /**
   * Connection errors, failed catch-up reads and exceptions thrown by `deliver`.
   * They never propagate: the broker reports them here and carries on. Default: ignored.
   */
  onError?: (error: Error) => void;
}

const CLOSE_TIMEOUT_MS = 2_000;

/**
 * Topics whose last published seq a node remembers, the most recently published ones: each
 * publish tells the script where the topic stood, so that a Redis restored from an older
 * snapshot is found at the first publish (see PUBLISH_LUA).
 */
const PUBLISHED_TOPICS_KEPT = 10_000;

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
 * restart. A Redis restored from an older snapshot (same epoch, lower seq) would hand out the
 * lost seqs again under the same epoch: a node that has seen a later seq of the topic (the last
 * delivered here, or the last it published) numbers the topic anew (a new epoch, the stream
 * emptied) at its first publish to it or when it catches up after the reconnect, so every node
 * and every resuming client sees a new epoch. Publishes made on the restored Redis before that,
 * by nodes that had seen no such seq, can take the count past what a subscriber had: those
 * reused seqs cannot be told from the lost ones.
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
 * `commandTimeoutMs` rejects too (a publish that timed out may still have been stored: it
 * rejects with PublishUnconfirmedError, as one whose connection dropped under it). Both
 * connections reconnect by themselves. A Redis that stops answering with its connection up
 * (hung, stopped) is found by a PING every `healthCheckIntervalMs`: `ready` is false while
 * the checks fail. Errors are reported to `onError`, never thrown from event handlers.
 *
 * What a client can make it create: nothing. A subscribe reads the topic's hash (it does not
 * create it) and SUBSCRIBEs its channel; a history read only reads. A topic's keys are made by
 * its first publish, at most `newTopicsPerSecond` (burst `newTopicsBurst`) per node: a publish
 * that would create one more is refused with {@link TopicCreationLimitError}, nothing written.
 */
export class RedisBroker implements Broker {
  private readonly prefix: string;
  private readonly target: string;
  private readonly onError: (error: Error) => void;
  private readonly command: Redis;
  private readonly subscriber: Redis;
  /** Runs the Lua scripts on `command`, in call order. */
  private readonly runner: RedisScriptRunner;
  /** Stream-backed topics: seqs, catch-up, history. */
  private readonly topics: RedisTopicSubscriptions;
  /** `$`-topics (messages addressed to a node or user): plain channels, no history. */
  private readonly direct: RedisDirectChannels;
  private readonly connectTimeoutMs: number;
  /** New topics (their keys) this node may create per second. */
  private readonly creation: CreationBudget;
  private readonly idleTopicTtlMs: number;
  /** PINGs the command connection: a hung Redis makes `ready` false. */
  private readonly health: HealthCheck;
  /** Revoked users: a key per user, expiring with the entry. */
  private readonly denyList: RedisDenyList;
  /** Revoked sessions, per node: a sorted set and a hash, trimmed as they lapse. */
  private readonly sessionDenyList: RedisSessionDenyList;
  /** Topics' members (presence): see presence-redis.ts. */
  readonly presence: RedisPresenceStore;
  private closed = false;
  /** The next try of a resubscribe that failed (resubscribeUntilDone). */
  private resubscribeTimer: ReturnType<typeof setTimeout> | undefined;
  private closing: Promise<void> | undefined;
  private lastError: Error | undefined;
  /** Told when both connections are up again with the subscriptions in place (onRelinked). */
  private readonly relinkListeners = new Set<() => void>();
  /** The last seq this node published of each of its PUBLISHED_TOPICS_KEPT latest topics. */
  private readonly published = new Map<string, SeenSeq>();

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
    this.creation = new CreationBudget(options);
    this.idleTopicTtlMs = options.idleTopicTtlMs ?? DEFAULT_IDLE_TOPIC_TTL_MS;
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
    this.runner = new RedisScriptRunner(this.command, (cause) => this.unavailable(cause));
    const parts = {
      prefix: this.prefix,
      subscriber: this.subscriber,
      isClosed: () => this.closed,
      unavailable: (cause?: unknown) => this.unavailable(cause),
      onError: this.onError,
    };
    this.topics = new RedisTopicSubscriptions({ ...parts, runner: this.runner });
    this.direct = new RedisDirectChannels({ ...parts, command: this.command });
    this.denyList = new RedisDenyList(this.runner, this.prefix);
    this.sessionDenyList = new RedisSessionDenyList(
      this.runner,
      this.prefix,
      options.maxDeniedSessions,
    );
    this.presence = new RedisPresenceStore(this.runner, this.prefix);

    const reportError = (error: Error): void => {
      this.lastError = error;
      this.onError(error);
    };
    this.command.on('error', reportError);
    this.subscriber.on('error', reportError);
    this.health = new HealthCheck({
      intervalMs: options.healthCheckIntervalMs ?? 2_000,
      // ioredis rejects the PING after commandTimeout: that is the check's timeout.
      check: () => (this.command.status === 'ready' ? this.command.ping() : undefined),
      onFailing: (error) =>
        this.onError(this.unavailable(new Error(`no answer to PING: ${error.message}`))),
    });
    this.command.on('ready', () => {
      this.health.reset();
      // Anything that failed to catch up while the command connection was down tries again.
      if (this.subscriber.status !== 'ready') return;
      this.topics.catchUpAll();
      // A read after an outage may have failed on this connection alone: it is tried again.
      this.relinked();
    });
    this.subscriber.on('ready', () => this.resubscribeUntilDone(0));
    this.subscriber.on('message', (channel: string, message: string) => {
      try {
        if (!this.direct.onLive(channel, message)) this.topics.onLive(channel, message);
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
    return !this.closed && this.command.status === 'ready' && this.health.healthy;
  }

  /**
   * `listener` is called each time both connections are up again, the subscriber's channels
   * subscribed anew (a message published after that reaches this node). Also after a
   * reconnect of the command connection alone, and at the first connection: reading again
   * what a listener reads costs one more read, never a miss.
   */
  onRelinked(listener: () => void): () => void {
    const own = (): void => listener();
    this.relinkListeners.add(own);
    return () => {
      this.relinkListeners.delete(own);
    };
  }

  async publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
    except?: readonly string[],
  ): Promise<number> {
    this.assertUsable();
    // A message to a node or a user is a plain PUBLISH: sent, its answer lost, it may be delivered.
    if (isDirect(topic)) return unconfirmedIfSent(this.direct.publish(topic, payload));
    return (await this.publishScript(topic, payload, retention, undefined, except)).seq;
  }

  /**
   * Idempotent publish: the key is `<prefix>{<topic>}:once:<key>`, set by the publish script
   * itself (SET PX `windowMs`, holding the seq), so a retry racing the first cannot publish too.
   * No count bound: each key expires with its window.
   */
  async publishOnce(
    topic: string,
    payload: string,
    key: string,
    windowMs: number,
    retention: Retention = defaultRetention,
  ): Promise<OnceResult> {
    this.assertUsable();
    if (isDirect(topic)) throw new TypeError('publishOnce takes no $-topic: they keep nothing');
    const once = { key: redisOnceKey(this.prefix, topic, key), windowMs };
    const published = await this.publishScript(topic, payload, retention, once);
    return { seq: published.seq, duplicate: published.duplicate };
  }

  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    this.assertUsable();
    if (isDirect(topic)) return this.direct.subscribe(topic, deliver);
    return this.topics.subscribe(topic, deliver);
  }

  async unsubscribe(topic: string): Promise<void> {
    if (isDirect(topic)) return this.direct.unsubscribe(topic);
    return this.topics.unsubscribe(topic);
  }

  async history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    this.assertUsable();
    const keys = redisTopicKeys(this.prefix, topic);
    const read = await readTopic(
      this.runner,
      keys,
      topic,
      afterSeq,
      '+',
      pageLimit(limit) ?? 0,
      this.onError,
    );
    const history: History = { messages: read.messages, lastSeq: read.lastSeq };
    if (read.epoch !== '') history.epoch = read.epoch;
    return history;
  }

  /** Deny list: `<prefix>deny:<user>`, expiring (PX) when the entry lapses; no count bound. */
  async deny(user: string, revokedAt: number, forMs: number): Promise<void> {
    this.assertUsable();
    return this.denyList.deny(user, revokedAt, forMs);
  }

  async denied(user: string): Promise<Denial | undefined> {
    this.assertUsable();
    return this.denyList.denied(user);
  }

  /** Revoked sessions: `<prefix>deny-session:{<node>}:until` and `:record`, bounded per node. */
  async denySession(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    this.assertUsable();
    return this.sessionDenyList.deny(node, session, revokedAt, forMs, reason);
  }

  async deniedSessions(node: string): Promise<SessionDenial[]> {
    this.assertUsable();
    return this.sessionDenyList.denied(node);
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.resubscribeTimer);
    this.health.stop();
    this.topics.clear();
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

  /**
   * One publish script run (plain or keyed by `once`): told where this node last saw the topic,
   * refused past the creation budget, its outcome remembered; its failure told as unconfirmed
   * when it may have run all the same.
   */
  private async publishScript(
    topic: string,
    payload: string,
    retention: Retention,
    once: OnceKey | undefined,
    except?: readonly string[],
  ): Promise<Published> {
    const published = await unconfirmedIfSent(
      publishToTopic(
        this.runner,
        redisTopicKeys(this.prefix, topic),
        payload,
        retention,
        this.creation.available(),
        once,
        except,
        this.seen(topic),
        this.idleTopicTtlMs,
      ),
    );
    if (!published) throw new TopicCreationLimitError(topic, this.creation.perSecond);
    this.remember(topic, published);
    return published;
  }

  /**
   * The highest seq of `topic` this node has seen, with its epoch: of the last one delivered
   * here (if it is subscribed) and the last one it published (if among the latest topics it
   * published to); the delivered one when their epochs differ (it follows the topic as it goes).
   */
  private seen(topic: string): SeenSeq | undefined {
    const delivered = this.topics.seen(topic);
    const published = this.published.get(topic);
    if (delivered === undefined) return published;
    if (published === undefined || published.epoch !== delivered.epoch) return delivered;
    return published.seq > delivered.seq ? published : delivered;
  }

  /** After a publish: spend the creation budget if it made the topic, and keep its seq. */
  private remember(topic: string, published: Published): void {
    if (published.created) this.creation.spend();
    if (published.epoch === '') return; // a duplicate: it wrote nothing
    this.published.delete(topic);
    this.published.set(topic, { epoch: published.epoch, seq: published.seq });
    if (this.published.size > PUBLISHED_TOPICS_KEPT) {
      this.published.delete(this.published.keys().next().value!);
    }
  }

  private assertUsable(): void {
    if (this.closed) throw new Error('Redis broker closed');
    if (this.command.status !== 'ready') throw this.unavailable();
  }

  private unavailable(cause?: unknown): Error {
    return unavailableError(this.target, cause ?? this.lastError);
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
   * Subscribe again to what this node listens to, once its subscriber connection is back; tried
   * again with a backoff (RESUBSCRIBE_RETRY_MS, doubling to RESUBSCRIBE_RETRY_MAX_MS) until it
   * is done: a SUBSCRIBE that timed out or was refused (a slow or busy Redis) would otherwise
   * leave every topic of the node unheard, with no gap told, until the connection drops again.
   */
  private resubscribeUntilDone(attempt: number): void {
    clearTimeout(this.resubscribeTimer);
    this.resubscribeTimer = undefined;
    this.resubscribe().catch((error: unknown) => {
      this.onError(toError(error));
      // Closed, or the connection went again: its next 'ready' starts over.
      if (this.closed || this.subscriber.status !== 'ready') return;
      const delay = Math.min(RESUBSCRIBE_RETRY_MAX_MS, RESUBSCRIBE_RETRY_MS * 2 ** attempt);
      this.resubscribeTimer = setTimeout(() => this.resubscribeUntilDone(attempt + 1), delay);
      this.resubscribeTimer.unref();
    });
  }

  /** Both steps each time, the second whether the first failed or not; rejects if either did. */
  private async resubscribe(): Promise<void> {
    const [direct, topics] = await Promise.allSettled([
      this.direct.resubscribe().then(() => {
        // The `$`-topics are heard again: what they said meanwhile is read again (onRelinked).
        this.relinked();
      }),
      this.topics.resubscribe(),
    ]);
    if (direct.status === 'rejected') throw direct.reason;
    if (topics.status === 'rejected') throw topics.reason;
  }

  private relinked(): void {
    if (this.closed || this.command.status !== 'ready' || this.subscriber.status !== 'ready') {
      return;
    }
    for (const listener of [...this.relinkListeners]) {
      try {
        listener();
      } catch (error) {
        this.onError(toError(error));
      }
    }
  }
}

/**
 * A publish's outcome, its failure told as unconfirmed (PublishUnconfirmedError) when the script
 * may have run all the same: it was sent and its answer was lost.
 */
async function unconfirmedIfSent<T>(publishing: Promise<T>): Promise<T> {
  try {
    return await publishing;
  } catch (error) {
    if (!mayHaveRun(error)) throw error;
    const err = toError(error);
    throw new PublishUnconfirmedError(err.message, { cause: err });
  }
}
