import { createHash } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import {
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import type {
  Consumer,
  ConsumerMessages,
  JetStreamClient,
  JetStreamManager,
  JsMsg,
  StreamConfig,
  StreamInfo,
} from '@nats-io/jetstream';

import { defaultRetention } from './broker.js';
import type { Broker, BrokerMessage, History, Retention } from './broker.js';

/** What the broker sets on a topic's stream; JetStream defaults the rest. */
type TopicStreamConfig = Partial<StreamConfig> &
  Pick<StreamConfig, 'name' | 'max_msgs' | 'max_age' | 'discard' | 'duplicate_window'>;

/** How to reach NATS and name what the broker creates there. */
export interface NatsBrokerOptions {
  /** NATS server URL(s). Default `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /**
   * Names every stream (`<prefix>_<topic>`) and subject (`<prefix>.<topic>`) the broker
   * uses, so deployments sharing a NATS account stay apart; `[A-Za-z0-9_-]`, at most 64
   * characters. Default `wsrpc`.
   */
  prefix?: string;
  /**
   * Upper bound, in ms, on each operation that talks to NATS (connect attempt,
   * publish, subscribe, history, close). Default 5 000.
   */
  timeoutMs?: number;
  /** Wait between reconnect attempts, in ms; attempts never stop. Default 250. */
  reconnectWaitMs?: number;
  /** Replicas of each topic stream (clustered JetStream). Default 1. */
  replicas?: number;
  /**
   * Errors the broker recovers from in the background (a consumer that had to be
   * recreated, a subscriber callback that threw). Never thrown; ignored by default.
   */
  onError?: (err: unknown) => void;
  /**
   * Further connection options (credentials, TLS, client name). `servers`, `timeout`
   * and the reconnect settings above take precedence.
   */
  connection?: NodeConnectionOptions;
}

/** Thrown (as a rejection) when NATS cannot be reached or does not answer in time. */
export class NatsBrokerUnavailableError extends Error {
  override readonly name = 'NatsBrokerUnavailableError';
}

/** One live `subscribe`: where delivery stands and the consumer feeding it. */
interface TopicSubscription {
  readonly topic: string;
  deliver: (message: BrokerMessage) => void;
  /** The last sequence number handed to `deliver`; the consumer resumes after it. */
  lastSeq: number;
  /** The stream's creation time: a stream deleted and made again numbers from 1 anew. */
  epoch?: string;
  active: boolean;
  /** Bumped on every (re)start, so a stale consumer's messages are ignored. */
  generation: number;
  consumer?: Consumer;
  messages?: ConsumerMessages;
  restartTimer?: NodeJS.Timeout;
}

/** The NATS handles valid for one connection. */
interface Link {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** Topics starting with `$` carry messages addressed to a node or a user (see SessionRouter). */
function isDirect(topic: string): boolean {
  return topic.startsWith('$');
}

const NAME_LIMIT = 128;
const DEFAULT_DUPLICATE_WINDOW = 120_000_000_000;
const HISTORY_BATCH = 256;
const noop = (): void => undefined;

/**
 * A broker on NATS JetStream, shared by every gateway node connected to the same
 * NATS. Each topic is its own stream (`<prefix>_<encoded topic>`, one subject
 * `<prefix>.<encoded topic>`), so JetStream's stream sequence is the topic's
 * sequence: 1, 2, 3, ... without holes, the same on every node. Streams are created
 * on first use with the publish's retention (max messages, max age, discard old;
 * JetStream keeps at least one message and at least 100 ms), or with the default
 * retention by a subscriber that comes first; a later publish with other limits
 * updates the stream. File storage: history survives a NATS restart.
 *
 * Subscribers read through an ordered consumer starting after the last sequence
 * they were given; after a reconnect the consumer is recreated from there, so
 * what was published meanwhile (and is still retained) arrives, in order, once.
 * A topic's epoch is its stream's creation time: a stream deleted and made again numbers
 * from 1 anew, and a subscription that finds it so starts again from its first message.
 * A `$`-topic subscribe resolves once the server has the interest (a flush), so what another
 * node publishes after that reaches it.
 *
 * While disconnected, `ready` is false and every operation rejects at once with
 * {@link NatsBrokerUnavailableError}; operations that get no answer reject after
 * `timeoutMs` (a publish that timed out may still have been stored).
 */
export class NatsBroker implements Broker {
  private readonly servers: string | string[];
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly reconnectWaitMs: number;
  private readonly replicas: number;
  private readonly onError: (err: unknown) => void;
  private readonly connection: NodeConnectionOptions;

  private link: Link | undefined;
  private connected = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private connecting: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private wakeRetry: (() => void) | undefined;
  private readonly subscriptions = new Map<string, TopicSubscription>();
  /** `$`-topics (messages addressed to a node or user): core NATS, no stream, no history. */
  private readonly direct = new Map<string, { unsubscribe(): void }>();
  private directSeq = 0;
  /** Topics whose stream this node created or updated, with the limits it applied. */
  private readonly ensured = new Map<string, string>();
  /** Stream set-ups in flight, by topic and limits: concurrent publishes wait on one. */
  private readonly ensuring = new Map<string, Promise<void>>();

  private constructor(options: NatsBrokerOptions) {
    this.servers = options.servers ?? 'nats://127.0.0.1:4222';
    this.prefix = options.prefix ?? 'wsrpc';
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(this.prefix)) {
      throw new TypeError(
        `NATS broker prefix must match [A-Za-z0-9_-]{1,64}, got "${this.prefix}"`,
      );
    }
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.reconnectWaitMs = options.reconnectWaitMs ?? 250;
    this.replicas = options.replicas ?? 1;
    const onError = options.onError ?? noop;
    this.onError = (err) => {
      try {
        onError(err);
      } catch {
        // A failing error handler must not break recovery.
      }
    };
    this.connection = options.connection ?? {};
  }

  /**
   * Connect to NATS and return the broker. Resolves once the first connection
   * attempt has settled: connected (`ready` is true), or not (`ready` is false,
   * publishes reject with {@link NatsBrokerUnavailableError}, and the broker keeps
   * trying in the background until it connects or is closed). Once connected, the
   * client reconnects after any outage, without limit.
   *
   * ```ts
   * const broker = await NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', prefix: 'chat' });
   * ```
   */
  static async connect(options: NatsBrokerOptions = {}): Promise<NatsBroker> {
    const broker = new NatsBroker(options);
    await broker.connectOnce();
    if (!broker.link && !broker.closed) broker.scheduleConnect();
    return broker;
  }

  /** True while connected to NATS. */
  get ready(): boolean {
    return !this.closed && this.connected && this.link !== undefined;
  }

  private directSubject(topic: string): string {
    return `${this.prefix}-direct.${encodeTopic(topic)}`;
  }

  /** The stream and subject a topic lives on. */
  names(topic: string): { stream: string; subject: string } {
    const token = encodeTopic(topic);
    return { stream: `${this.prefix}_${token}`, subject: `${this.prefix}.${token}` };
  }

  async publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
  ): Promise<number> {
    const what = `publish to "${topic}"`;
    const link = this.requireLink(what);
    if (isDirect(topic)) {
      // Addressed messages need no history: a stream per node or user would pile up.
      link.nc.publish(this.directSubject(topic), payload);
      return ++this.directSeq;
    }
    return this.bounded(what, async () => {
      const { subject } = this.names(topic);
      await this.ensureStream(link, topic, retention);
      try {
        return (await link.js.publish(subject, payload, { timeout: this.timeoutMs })).seq;
      } catch (err) {
        // No stream took the message: it was deleted behind our back. Recreate, retry once.
        if (!isNoResponders(err)) throw err;
        this.ensured.delete(topic);
        await this.ensureStream(link, topic, retention);
        return (await link.js.publish(subject, payload, { timeout: this.timeoutMs })).seq;
      }
    });
  }

  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    const existing = this.subscriptions.get(topic);
    if (existing) {
      existing.deliver = deliver;
      return;
    }
    const what = `subscribe to "${topic}"`;
    const link = this.requireLink(what);
    if (isDirect(topic)) {
      this.direct.get(topic)?.unsubscribe();
      let seq = 0;
      // Core subscriptions are re-established by the client after a reconnect.
      const subscription = link.nc.subscribe(this.directSubject(topic), {
        callback: (err, msg) => {
          if (err) return this.onError(err);
          try {
            deliver({ topic, seq: ++seq, payload: msg.string() });
          } catch (error) {
            this.onError(error);
          }
        },
      });
      this.direct.set(topic, subscription);
      // Resolve once the server has the interest (a round trip on this connection): a message
      // published by another node after that reaches us.
      try {
        await this.bounded(what, () => link.nc.flush());
      } catch (err) {
        if (this.direct.get(topic) === subscription) this.direct.delete(topic);
        subscription.unsubscribe();
        throw err;
      }
      return;
    }
    const sub: TopicSubscription = { topic, deliver, lastSeq: 0, active: true, generation: 0 };
    this.subscriptions.set(topic, sub);
    try {
      await this.bounded(what, async () => {
        // New messages only: start after what the topic holds now.
        const info = await this.streamInfoOrCreate(link, topic);
        sub.lastSeq = info.state.last_seq;
        sub.epoch = info.created;
        await this.startConsumer(link, sub);
      });
    } catch (err) {
      if (this.subscriptions.get(topic) === sub) this.subscriptions.delete(topic);
      sub.active = false;
      void this.stopConsumer(sub);
      throw err;
    }
  }

  async unsubscribe(topic: string): Promise<void> {
    const direct = this.direct.get(topic);
    if (direct) {
      this.direct.delete(topic);
      direct.unsubscribe();
      return;
    }
    const sub = this.subscriptions.get(topic);
    if (!sub) return;
    this.subscriptions.delete(topic);
    sub.active = false;
    await this.bounded(`unsubscribe from "${topic}"`, () => this.stopConsumer(sub)).catch(
      this.onError,
    );
  }

  async history(topic: string, afterSeq: number): Promise<History> {
    const what = `read history of "${topic}"`;
    const link = this.requireLink(what);
    return this.bounded(what, async () => {
      const { stream } = this.names(topic);
      let info: StreamInfo;
      try {
        info = await link.jsm.streams.info(stream);
      } catch (err) {
        if (isStreamNotFound(err)) return { messages: [], lastSeq: 0 };
        throw err;
      }
      const lastSeq = info.state.last_seq;
      const epoch = info.created;
      const messages: BrokerMessage[] = [];
      const after = Number.isFinite(afterSeq) ? Math.max(0, Math.floor(afterSeq)) : 0;
      let next = Math.max(after + 1, info.state.first_seq);
      if (next > lastSeq || info.state.messages === 0) return { messages, lastSeq, epoch };
      const consumer = await link.js.consumers.get(stream, {
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: next,
      });
      try {
        // Batches until the last sequence seen in stream info; a batch that comes back
        // short (older messages aged out meanwhile) ends at its expiry, not in a hang.
        while (next <= lastSeq) {
          const batch = await consumer.fetch({
            max_messages: Math.min(lastSeq - next + 1, HISTORY_BATCH),
            expires: 1_000,
          });
          let received = 0;
          for await (const m of batch) {
            received++;
            if (m.seq > lastSeq) continue;
            messages.push({ topic, seq: m.seq, payload: m.string(), epoch });
            next = m.seq + 1;
          }
          if (received === 0) break;
        }
      } finally {
        consumer.delete().catch(noop);
      }
      return { messages, lastSeq, epoch };
    });
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.wakeRetry?.();
    const deadline = Date.now() + this.timeoutMs;
    const left = (): number => Math.max(0, deadline - Date.now());
    const pending: Promise<void>[] = [];
    for (const sub of this.subscriptions.values()) {
      sub.active = false;
      pending.push(this.stopConsumer(sub));
    }
    this.subscriptions.clear();
    if (this.connecting) pending.push(this.connecting);
    await withTimeout(Promise.all(pending), left(), 'close').catch(noop);
    this.connected = false;
    const link = this.link;
    this.link = undefined;
    if (!link) return;
    await withTimeout(link.nc.drain(), left(), 'drain').catch(noop);
    if (!link.nc.isClosed()) await link.nc.close().catch(noop);
  }

  // --- connection -------------------------------------------------------------------

  /** One connection attempt; on success the broker is live. Never rejects. */
  private connectOnce(): Promise<void> {
    this.connecting ??= (async () => {
      try {
        const nc = await connect({
          ...this.connection,
          servers: this.servers,
          timeout: this.timeoutMs,
          reconnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: this.reconnectWaitMs,
          reconnectJitter: Math.min(100, this.reconnectWaitMs),
          waitOnFirstConnect: false,
        });
        if (this.closed) {
          await nc.close().catch(noop);
          return;
        }
        await this.attach(nc);
      } catch (err) {
        this.onError(err);
      } finally {
        this.connecting = undefined;
      }
    })();
    return this.connecting;
  }

  /** Retry the initial connection until it succeeds or the broker closes. */
  private scheduleConnect(): void {
    if (this.closed || this.retryTimer) return;
    const wait = new Promise<void>((resolve) => {
      this.wakeRetry = resolve;
      this.retryTimer = setTimeout(resolve, this.reconnectWaitMs);
    });
    void wait.then(async () => {
      this.retryTimer = undefined;
      this.wakeRetry = undefined;
      if (this.closed) return;
      await this.connectOnce();
      if (!this.link) this.scheduleConnect();
    });
  }

  private async attach(nc: NatsConnection): Promise<void> {
    const opts = { timeout: this.timeoutMs };
    let link: Link;
    try {
      link = {
        nc,
        js: jetstream(nc, opts),
        jsm: await jetstreamManager(nc, { ...opts, checkAPI: false }),
      };
    } catch (err) {
      await nc.close().catch(noop);
      throw err;
    }
    this.link = link;
    this.connected = true;
    this.ensured.clear();
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') {
          this.connected = false;
          for (const sub of this.subscriptions.values()) this.suspend(sub);
        } else if (status.type === 'reconnect') {
          this.connected = true;
          // The server may have restarted without our consumers: recreate them all.
          for (const sub of this.subscriptions.values()) this.scheduleRestart(sub, 0);
        }
      }
    })().catch(this.onError);
    void nc.closed().then((err) => {
      if (this.link !== link) return;
      this.link = undefined;
      this.connected = false;
      if (this.closed) return;
      // Closed although reconnects never give up (e.g. rejected credentials): start over.
      this.onError(err ?? new Error('NATS connection closed'));
      this.scheduleConnect();
    }, this.onError);
    for (const sub of this.subscriptions.values()) this.scheduleRestart(sub, 0);
  }

  private requireLink(what: string): Link {
    if (this.closed) throw new NatsBrokerUnavailableError(`NATS broker closed: cannot ${what}`);
    const link = this.link;
    if (!link || !this.connected) {
      throw new NatsBrokerUnavailableError(
        `NATS broker unavailable: cannot ${what}, not connected to NATS`,
      );
    }
    return link;
  }

  /** Run `op` with the broker's time bound, turning failures into clear broker errors. */
  private async bounded<T>(what: string, op: () => Promise<T>): Promise<T> {
    try {
      return await withTimeout(op(), this.timeoutMs, what);
    } catch (err) {
      if (err instanceof NatsBrokerUnavailableError) throw err;
      if (err instanceof JetStreamApiError) {
        throw new Error(`NATS broker: cannot ${what}: ${err.message}`, { cause: err });
      }
      const reason = err instanceof Error ? err.message : String(err);
      throw new NatsBrokerUnavailableError(`NATS broker unavailable: cannot ${what}: ${reason}`, {
        cause: err,
      });
    }
  }

  // --- streams --------------------------------------------------------------------------

  private streamConfig(topic: string, retention: Retention): TopicStreamConfig {
    const { stream, subject } = this.names(topic);
    const maxAge = maxAgeNanos(retention.maxAgeMs);
    return {
      name: stream,
      subjects: [subject],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      num_replicas: this.replicas,
      max_msgs: Number.isFinite(retention.maxLength)
        ? Math.max(1, Math.floor(retention.maxLength))
        : -1,
      max_age: maxAge,
      // JetStream's default (2 min) may not exceed max_age: set it so updates stay valid.
      duplicate_window:
        maxAge > 0 ? Math.min(maxAge, DEFAULT_DUPLICATE_WINDOW) : DEFAULT_DUPLICATE_WINDOW,
    };
  }

  /** Create the topic's stream with `retention`, or bring an existing one to it. */
  /**
   * Make sure the topic's stream exists with `retention`. Concurrent callers for one topic share
   * one attempt: publishes made in one turn then reach `js.publish` in the order they were
   * made, so the stream numbers them in publish order (separate attempts finishing in any
   * order would reorder the first burst on a new topic).
   */
  private ensureStream(link: Link, topic: string, retention: Retention): Promise<void> {
    const config = this.streamConfig(topic, retention);
    const limits = `${config.max_msgs}/${config.max_age}`;
    if (this.ensured.get(topic) === limits) return Promise.resolve();
    const key = `${topic}\u0000${limits}`;
    let pending = this.ensuring.get(key);
    if (!pending) {
      // `ensured` is set in the very reaction that settles `pending`, so every caller already
      // waiting continues before any later caller that finds the stream ensured.
      pending = this.addOrUpdateStream(link, config).then(
        () => {
          this.ensuring.delete(key);
          this.ensured.set(topic, limits);
        },
        (err: unknown) => {
          this.ensuring.delete(key);
          throw err;
        },
      );
      this.ensuring.set(key, pending);
    }
    return pending;
  }

  private async addOrUpdateStream(
    link: Link,
    config: ReturnType<NatsBroker['streamConfig']>,
  ): Promise<void> {
    try {
      // Idempotent: a node racing us with the same configuration gets the same stream.
      await link.jsm.streams.add(config);
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
      await link.jsm.streams.update(config.name, {
        max_msgs: config.max_msgs,
        max_age: config.max_age,
        duplicate_window: config.duplicate_window,
        discard: config.discard,
      });
    }
  }

  /** The topic's stream, created with the default retention if nobody published yet. */
  private async streamInfoOrCreate(link: Link, topic: string): Promise<StreamInfo> {
    const { stream } = this.names(topic);
    try {
      return await link.jsm.streams.info(stream);
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    try {
      return await link.jsm.streams.add(this.streamConfig(topic, defaultRetention));
    } catch (err) {
      // Someone created it first, with other limits: theirs stand.
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
      return link.jsm.streams.info(stream);
    }
  }

  // --- subscriptions -------------------------------------------------------------------

  /** (Re)start the subscription's ordered consumer right after its last delivered seq. */
  private async startConsumer(link: Link, sub: TopicSubscription): Promise<void> {
    const generation = ++sub.generation;
    const stale = (): boolean => !sub.active || sub.generation !== generation || this.closed;
    void this.retire(sub);
    const { stream } = this.names(sub.topic);
    const consumer = await link.js.consumers.get(stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: sub.lastSeq + 1,
    });
    if (stale()) {
      consumer.delete().catch(noop);
      return;
    }
    const messages = await consumer.consume({
      max_messages: 256,
      // Also the idle-heartbeat period (half of it) that detects a consumer lost on the server.
      expires: 10_000,
      callback: (m) => this.receive(sub, generation, m),
    });
    if (stale()) {
      messages.stop();
      consumer.delete().catch(noop);
      return;
    }
    sub.consumer = consumer;
    sub.messages = messages;
    void messages.closed().then((err) => {
      // Ended on its own (not by us): recreate it from the last delivered seq.
      if (!stale()) {
        if (err) this.onError(err);
        this.scheduleRestart(sub, 1);
      }
    }, this.onError);
  }

  private receive(sub: TopicSubscription, generation: number, m: JsMsg): void {
    if (!sub.active || sub.generation !== generation || m.seq <= sub.lastSeq) return;
    sub.lastSeq = m.seq;
    try {
      sub.deliver({ topic: sub.topic, seq: m.seq, payload: m.string(), epoch: sub.epoch });
    } catch (err) {
      this.onError(err);
    }
  }

  /** Stop delivery for good (unsubscribe, close, failed subscribe). */
  private stopConsumer(sub: TopicSubscription): Promise<void> {
    clearTimeout(sub.restartTimer);
    sub.restartTimer = undefined;
    sub.generation++;
    return this.retire(sub);
  }

  /** Stop the current consumer and delete it on the server (best effort, if connected). */
  private retire(sub: TopicSubscription): Promise<void> {
    const { messages, consumer } = sub;
    sub.messages = undefined;
    sub.consumer = undefined;
    messages?.stop();
    if (!consumer || !this.link || !this.connected) return Promise.resolve();
    return consumer.delete().then(noop, noop);
  }

  /**
   * Disconnected: stop the consumer locally, so the client library does not also try to
   * recover it; the reconnect handler recreates it (and deletes the old one if it survived).
   */
  private suspend(sub: TopicSubscription): void {
    clearTimeout(sub.restartTimer);
    sub.restartTimer = undefined;
    sub.generation++;
    sub.messages?.stop();
    sub.messages = undefined;
  }

  private scheduleRestart(sub: TopicSubscription, attempt: number): void {
    if (!sub.active || this.closed) return;
    clearTimeout(sub.restartTimer);
    const delay = attempt === 0 ? 0 : Math.min(2_000, 100 * 2 ** attempt);
    sub.restartTimer = setTimeout(() => {
      sub.restartTimer = undefined;
      void this.restart(sub, attempt);
    }, delay);
  }

  private async restart(sub: TopicSubscription, attempt: number): Promise<void> {
    const link = this.link;
    // While disconnected, the reconnect handler restarts every subscription.
    if (!sub.active || this.closed || !link || !this.connected) return;
    try {
      await withTimeout(
        (async () => {
          const info = await this.streamInfoOrCreate(link, sub.topic);
          if (sub.epoch !== undefined && info.created !== sub.epoch) {
            // The stream was deleted and made again: its numbering starts from 1 anew.
            sub.lastSeq = 0;
          }
          sub.epoch = info.created;
          await this.startConsumer(link, sub);
        })(),
        this.timeoutMs,
        `resume "${sub.topic}"`,
      );
    } catch (err) {
      this.onError(err);
      this.scheduleRestart(sub, attempt + 1);
    }
  }
}

/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** A JetStream publish nobody answered: no stream listens on the subject. */
function isNoResponders(err: unknown): boolean {
  return err instanceof Error && /no responders|not enabled/i.test(err.message);
}

/** Stream max_age in nanoseconds: at least 100 ms; 0 (no limit) when not finite. */
function maxAgeNanos(maxAgeMs: number): number {
  if (!Number.isFinite(maxAgeMs)) return 0;
  return Math.min(Math.round(Math.max(100, maxAgeMs) * 1e6), Number.MAX_SAFE_INTEGER);
}

/**
 * A topic as one subject token and stream-name part: `[A-Za-z0-9-]` kept, every
 * other UTF-8 byte (including `_`) written `_XX`, so distinct topics never collide;
 * `_` alone for the empty topic. Long names keep a readable head plus `__` and a hash.
 */
export function encodeTopic(topic: string): string {
  let out = '';
  for (const byte of Buffer.from(topic, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9-]/.test(ch) ? ch : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out === '') return '_';
  if (out.length <= NAME_LIMIT) return out;
  const hash = createHash('sha256').update(topic, 'utf8').digest('hex').slice(0, 32);
  return `${out.slice(0, NAME_LIMIT - 34)}__${hash}`;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new NatsBrokerUnavailableError(`NATS broker unavailable: ${what} timed out`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
