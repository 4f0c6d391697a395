import { connect } from '@nats-io/transport-node';
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import { StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamPublishOptions, PubAck } from '@nats-io/jetstream';

import { PublishUnconfirmedError, defaultRetention, pageLimit } from './broker.js';
import type { Broker, BrokerMessage, History, OnceResult, Retention } from './broker.js';
import { CreationBudget } from './creation-budget.js';
import type { TopicCreationBudget } from './creation-budget.js';
import { DEFAULT_MAX_DENIED_USERS } from './deny-list.js';
import type { Denial } from './deny-list.js';
import { NatsDenyList } from './deny-list-nats.js';
import { DEFAULT_MAX_DENIED_SESSIONS } from './session-deny-list.js';
import type { SessionDenial } from './session-deny-list.js';
import { NatsSessionDenyList } from './session-deny-list-nats.js';
import { HealthCheck } from './health-check.js';
import { NatsConsumers } from './nats-consumers.js';
import { NatsDirectSubjects } from './nats-direct.js';
import { DEFAULT_MAX_IDEMPOTENCY_KEYS, NatsOnceKeys, natsOnceNames } from './nats-once.js';
import { NatsPresenceStore } from './presence-nats.js';
import { exceptHeaders } from './nats-except.js';
import { readHistory } from './nats-history.js';
import { NatsBrokerUnavailableError, bounded, noop, withTimeout } from './nats-link.js';
import type { Link } from './nats-link.js';
import { isDirect, natsTopicNames } from './nats-names.js';
import { NatsStreams, isNoResponders } from './nats-streams.js';
import { natsServerOptions } from './nats-servers.js';
import type { NatsServerOptions } from './nats-servers.js';

export { NatsBrokerUnavailableError } from './nats-link.js';
export { encodeTopic } from './nats-names.js';

/** How to reach NATS and name what the broker creates there. */
export interface NatsBrokerOptions extends TopicCreationBudget {
  /**
   * NATS server URL(s), a list or comma-separated. Default `nats://127.0.0.1:4222`. Credentials
   * in a URL (`nats://user:password@host:4222`, `nats://token@host:4222`) are used to connect
   * (percent-encode `@`, `:` and `/` in them); the other URLs' must be the same, and
   * `connection` must then give none of its own.
   */
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
   * Where the topic streams this broker creates keep their history: `file` (it survives a
   * restart of NATS) or `memory` (it does not: after a restart each topic is a new stream, a
   * new epoch, and its subscribers are told of the gap). File storage holds two of the NATS
   * server's file descriptors per stream, so the server's open-file limit bounds the topics
   * with history at about half of it; memory storage holds none, and makes a stream several
   * times faster. A stream that exists already keeps the storage it was made with. Default
   * `file`.
   */
  historyStorage?: 'file' | 'memory';
  /**
   * Round-trip to the server (a flush) this often, in ms, while connected; two checks in a row
   * without an answer within `timeoutMs` make `ready` false (a server that hangs with the
   * connection up), until one is answered. 0 turns the check off. Default 2 000.
   */
  healthCheckIntervalMs?: number;
  /**
   * Look for idle topic streams of this prefix this often, in ms, and delete them: no message
   * retained (all older than the topic's history age) and no consumer from any node. 0 turns
   * the sweep off (a stream is still deleted when its last subscriber leaves it idle).
   * Default 600 000 (10 minutes).
   */
  idleStreamSweepMs?: number;
  /**
   * Users the deny list (revokeUser; the bucket `<prefix>-deny`) holds at most; a revocation
   * beyond it first drops the lapsed entries, and is refused when none has lapsed.
   * Set when the bucket is created. Default 100 000.
   */
  maxDeniedUsers?: number;
  /**
   * Revoked sessions (revokeSession of another node's session; the bucket
   * `<prefix>-deny-session`) kept at most, every node's together; a revocation beyond it first
   * drops the lapsed records, and is refused when none has lapsed. Set when the
   * bucket is created. Default 100 000.
   */
  maxDeniedSessions?: number;
  /**
   * Idempotency keys (publishOnce) the `<prefix>-once` bucket holds at most; beyond it the
   * oldest is dropped first. Default 1 000 000.
   */
  maxIdempotencyKeys?: number;
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

/**
 * A broker on NATS JetStream, shared by every gateway node connected to the same
 * NATS. Each topic is its own stream (`<prefix>_<encoded topic>`, one subject
 * `<prefix>.<encoded topic>`), so JetStream's stream sequence is the topic's
 * sequence: 1, 2, 3, ... without holes, the same on every node. Streams are created
 * by the topic's first publish, with its retention (max messages, max age, discard old;
 * JetStream keeps at least one message and at least 100 ms); a later publish with other
 * limits updates the stream. File storage by default: history survives a NATS restart
 * (`historyStorage`).
 *
 * Subscribers read through an ordered consumer starting after the last sequence
 * they were given; after a reconnect the consumer is recreated from there, so
 * what was published meanwhile (and is still retained) arrives, in order, once.
 * A topic's epoch is its stream's creation time: a stream deleted and made again numbers
 * from 1 anew, and a subscription that finds it so starts again from its first message. A
 * stream whose store came back older (same creation time, a lower last seq) is resumed from
 * its last seq, so that the new messages given the lost ones' seqs are delivered, told to this
 * node's subscribers as a numbering that went back.
 * A `$`-topic subscribe resolves once the server has the interest (a flush), so what another
 * node publishes after that reaches it.
 *
 * What a client can make it create: nothing that outlives it. A topic's stream is made by its
 * first publish, at most `newTopicsPerSecond` (burst `newTopicsBurst`) per node: a publish that
 * would make one more is refused with {@link TopicCreationLimitError}. A subscribe to a topic
 * without a stream waits for JetStream's advisory that it was created (so the broker's user
 * needs to subscribe to `$JS.EVENT.ADVISORY.STREAM.CREATED.<prefix>_*`), and its consumer then
 * starts at the stream's first message. Streams that are idle (nothing retained, no consumer
 * on any node) are deleted when their last subscriber here leaves, and by a sweep every
 * `idleStreamSweepMs`; a topic published to again gets a new stream (a new epoch).
 *
 * While disconnected, `ready` is false and every operation rejects at once with
 * {@link NatsBrokerUnavailableError}; operations that get no answer reject after
 * `timeoutMs` (a publish that timed out may still have been stored: it rejects with
 * PublishUnconfirmedError, as one whose connection dropped under it). A server that stops
 * answering with the connection up is found by a round trip every `healthCheckIntervalMs`:
 * `ready` is false while those fail.
 */
export class NatsBroker implements Broker {
  /** The server URLs without credentials, and the credentials they carried. */
  private readonly servers: NatsServerOptions;
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
  /** Topic streams this node set up, and setting them up. */
  private readonly streams: NatsStreams;
  /** Stream-backed subscriptions: one ordered consumer per topic. */
  private readonly consumers: NatsConsumers;
  /** `$`-topics (messages addressed to a node or user): core NATS, no stream, no history. */
  private readonly direct: NatsDirectSubjects;
  /** Round trips that tell a hung server from a quiet one. */
  private readonly health: HealthCheck;
  /** Revoked users: a JetStream key-value bucket. */
  private readonly denyList: NatsDenyList;
  /** Revoked sessions, keyed by node and session: a JetStream key-value bucket. */
  private readonly sessionDenyList: NatsSessionDenyList;
  /** Idempotency keys of publishOnce: a JetStream key-value bucket. */
  private readonly onceKeys: NatsOnceKeys;
  /** Topics' members (presence): a JetStream key-value bucket, see presence-nats.ts. */
  readonly presence: NatsPresenceStore;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** Told when the connection is up again with the subscriptions in place (onRelinked). */
  private readonly relinkListeners = new Set<() => void>();

  private constructor(options: NatsBrokerOptions) {
    this.connection = options.connection ?? {};
    this.servers = natsServerOptions(options.servers ?? 'nats://127.0.0.1:4222', this.connection);
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
    this.streams = new NatsStreams(
      this.prefix,
      this.replicas,
      new CreationBudget(options),
      this.timeoutMs,
      storageOf(options.historyStorage),
    );
    this.direct = new NatsDirectSubjects(this.prefix, this.timeoutMs, this.onError);
    this.denyList = new NatsDenyList(
      this.prefix,
      this.replicas,
      this.timeoutMs,
      options.maxDeniedUsers ?? DEFAULT_MAX_DENIED_USERS,
    );
    this.sessionDenyList = new NatsSessionDenyList(
      this.prefix,
      this.replicas,
      this.timeoutMs,
      options.maxDeniedSessions ?? DEFAULT_MAX_DENIED_SESSIONS,
    );
    this.presence = new NatsPresenceStore(this.prefix, this.replicas, this.timeoutMs, (what) =>
      this.requireLink(what),
    );
    this.onceKeys = new NatsOnceKeys(
      this.prefix,
      this.replicas,
      this.timeoutMs,
      options.maxIdempotencyKeys ?? DEFAULT_MAX_IDEMPOTENCY_KEYS,
    );
    this.consumers = new NatsConsumers({
      prefix: this.prefix,
      timeoutMs: this.timeoutMs,
      streams: this.streams,
      liveLink: () => (this.connected ? this.link : undefined),
      isClosed: () => this.closed,
      onError: this.onError,
    });
    this.health = new HealthCheck({
      intervalMs: options.healthCheckIntervalMs ?? 2_000,
      timeoutMs: this.timeoutMs,
      check: () => (this.connected && this.link ? this.link.nc.flush() : undefined),
      onFailing: (error) =>
        this.onError(new NatsBrokerUnavailableError(`NATS broker not answering: ${error.message}`)),
    });
    const sweepMs = options.idleStreamSweepMs ?? 600_000;
    if (sweepMs > 0) {
      this.sweepTimer = setInterval(() => void this.sweepIdleStreams(), sweepMs);
      this.sweepTimer.unref();
    }
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

  /** True while connected to NATS, and it answers. */
  get ready(): boolean {
    return !this.closed && this.connected && this.link !== undefined && this.health.healthy;
  }

  /**
   * `listener` is called each time the client reconnects (or a new connection is made), after a
   * round trip on the connection: the server then has the subscriptions the client sent again
   * on reconnecting (on a new connection, the `$`-topic subscriptions the broker made on it), so
   * a message published after that reaches this node.
   */
  onRelinked(listener: () => void): () => void {
    const own = (): void => listener();
    this.relinkListeners.add(own);
    return () => {
      this.relinkListeners.delete(own);
    };
  }

  /** The stream and subject a topic lives on. */
  names(topic: string): { stream: string; subject: string } {
    return natsTopicNames(this.prefix, topic);
  }

  async publish(
    topic: string,
    payload: string,
    retention: Retention = defaultRetention,
    except?: readonly string[],
  ): Promise<number> {
    const what = `publish to "${topic}"`;
    const link = this.requireLink(what);
    if (isDirect(topic)) return this.direct.publish(link, topic, payload);
    const options = { timeout: this.timeoutMs, headers: exceptHeaders(except) };
    const sent: PublishProgress = { to: false, stored: false, givenUp: false };
    return bounded(what, this.timeoutMs, async () => {
      return (await this.publishToStream(link, topic, payload, retention, options, sent)).seq;
    }).catch((err: unknown) => {
      throw unconfirmedIfSent(err, sent);
    });
  }

  /**
   * Idempotent publish (see NatsOnceKeys): a key held in the `<prefix>-once` bucket answers its
   * seq; else the message is published with the key as `Nats-Msg-Id` (JetStream's duplicate
   * window makes racing retries land once, and answers them the first seq) and the key is
   * written to the bucket for the rest of `windowMs`.
   */
  async publishOnce(
    topic: string,
    payload: string,
    key: string,
    windowMs: number,
    retention: Retention = defaultRetention,
  ): Promise<OnceResult> {
    const what = `publish to "${topic}"`;
    const link = this.requireLink(what);
    if (isDirect(topic)) throw new TypeError('publishOnce takes no $-topic: they keep nothing');
    const sent: PublishProgress = { to: false, stored: false, givenUp: false };
    return bounded(what, this.timeoutMs, async () => {
      const seen = await this.onceKeys.seen(link, topic, key);
      if (seen !== undefined) return { seq: seen, duplicate: true };
      const msgID = natsOnceNames(this.prefix, topic, key).msgId;
      const options = { timeout: this.timeoutMs, msgID };
      const ack = await this.publishToStream(link, topic, payload, retention, options, sent);
      // Stored: whatever fails now, the message is published (a retry with the key within
      // JetStream's duplicate window gets its seq).
      sent.stored = true;
      await this.onceKeys.remember(link, topic, key, ack.seq, windowMs);
      return { seq: ack.seq, duplicate: ack.duplicate };
    }).catch((err: unknown) => {
      throw unconfirmedIfSent(err, sent);
    });
  }

  /**
   * Publish to the topic's stream, made first if this node has not set it up. A publish that no
   * stream took ("no responders": nothing stored) found it deleted behind our back: the stream
   * is made again, and the message published again, once. `sent.to` is set once the message is
   * on its way to a stream that may take it: from then on a failure leaves it unknown whether
   * it was stored.
   */
  private async publishToStream(
    link: Link,
    topic: string,
    payload: string,
    retention: Retention,
    options: Partial<JetStreamPublishOptions>,
    sent: PublishProgress,
  ): Promise<PubAck> {
    const { subject } = this.names(topic);
    await this.streams.ensureStream(link, topic, retention);
    // Timed out meanwhile: the publisher was told it was not published, so it is not sent.
    if (sent.givenUp) throw new NatsBrokerUnavailableError(`NATS broker: publish given up`);
    try {
      sent.to = true;
      return await link.js.publish(subject, payload, options);
    } catch (err) {
      if (!isNoResponders(err)) throw err;
      sent.to = false;
      this.streams.forget(topic);
      await this.streams.ensureStream(link, topic, retention);
      if (sent.givenUp) throw new NatsBrokerUnavailableError(`NATS broker: publish given up`);
      sent.to = true;
      return link.js.publish(subject, payload, options);
    }
  }

  async subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    if (this.consumers.redeliver(topic, deliver)) return;
    const link = this.requireLink(`subscribe to "${topic}"`);
    if (isDirect(topic)) return this.direct.subscribe(link, topic, deliver);
    return this.consumers.subscribe(link, topic, deliver);
  }

  async unsubscribe(topic: string): Promise<void> {
    if (this.direct.unsubscribe(topic)) return;
    return this.consumers.unsubscribe(topic);
  }

  async history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    const what = `read history of "${topic}"`;
    const link = this.requireLink(what);
    return bounded(what, this.timeoutMs, () =>
      readHistory(link, this.names(topic).stream, topic, afterSeq, pageLimit(limit)),
    );
  }

  async deny(user: string, revokedAt: number, forMs: number): Promise<void> {
    const link = this.requireLink(`deny "${user}"`);
    return this.denyList.deny(link, user, revokedAt, forMs);
  }

  async denied(user: string): Promise<Denial | undefined> {
    const link = this.requireLink(`read the deny list for "${user}"`);
    return this.denyList.denied(link, user);
  }

  async denySession(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    const link = this.requireLink(`revoke session "${session}"`);
    return this.sessionDenyList.deny(link, node, session, revokedAt, forMs, reason);
  }

  async deniedSessions(node: string): Promise<SessionDenial[]> {
    const link = this.requireLink(`read the revoked sessions of "${node}"`);
    return this.sessionDenyList.denied(link, node);
  }

  /**
   * Delete the idle topic streams of this prefix (nothing retained, no consumer on any node);
   * resolves with how many. Runs by itself every `idleStreamSweepMs`; never rejects.
   */
  async sweepIdleStreams(): Promise<number> {
    const link = this.connected ? this.link : undefined;
    if (!link || this.closed || this.sweeping) return 0;
    this.sweeping = true;
    try {
      return await this.streams.sweepIdle(link);
    } catch (err) {
      this.onError(err);
      return 0;
    } finally {
      this.sweeping = false;
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.health.stop();
    clearInterval(this.sweepTimer);
    clearTimeout(this.retryTimer);
    this.wakeRetry?.();
    const deadline = Date.now() + this.timeoutMs;
    const left = (): number => Math.max(0, deadline - Date.now());
    const pending = this.consumers.stopAll();
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
          ...this.servers,
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
    this.health.reset();
    this.streams.forgetAll();
    // A new connection has none of the last one's core subscriptions: the `$`-topics held are
    // subscribed on it before anything else can use it (the consumers follow below).
    this.direct.relink(link);
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') {
          this.connected = false;
          this.consumers.suspendAll();
        } else if (status.type === 'reconnect') {
          this.connected = true;
          this.health.reset();
          // The server may have restarted without our consumers: recreate them all.
          this.consumers.restartAll();
          this.relinked(link);
        }
      }
    })().catch(this.onError);
    void nc.closed().then((err) => {
      if (this.link !== link) return;
      this.link = undefined;
      this.connected = false;
      // Their consumers died with the connection: restarted on the next one (attach).
      this.consumers.suspendAll();
      if (this.closed) return;
      // Closed although reconnects never give up (e.g. rejected credentials): start over.
      this.onError(err ?? new Error('NATS connection closed'));
      this.scheduleConnect();
    }, this.onError);
    this.consumers.restartAll();
    this.relinked(link);
  }

  /** Tell the onRelinked listeners, once the server has what the client sent before now. */
  private relinked(link: Link): void {
    if (this.relinkListeners.size === 0) return;
    link.nc.flush().then(() => {
      if (this.closed || this.link !== link || !this.connected) return;
      for (const listener of [...this.relinkListeners]) {
        try {
          listener();
        } catch (err) {
          this.onError(err);
        }
      }
    }, noop);
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
}

/**
 * How far a publish got: sent to its stream (`to`), acknowledged as stored (`stored`); or
 * `givenUp`: its failure was told, and it is not to be sent after that.
 */
interface PublishProgress {
  to: boolean;
  stored: boolean;
  givenUp: boolean;
}

/**
 * A publish's failure as the publisher is to see it: unconfirmed (PublishUnconfirmedError) when
 * the message was stored (what failed came after), or was sent to its stream and no answer came
 * (the connection dropped under it, or none in time), since the stream may have stored it; as
 * it is when it was never sent, or JetStream refused it (an API error, or no stream to take it).
 */
function unconfirmedIfSent(err: unknown, sent: PublishProgress): unknown {
  sent.givenUp = true;
  const unanswered =
    sent.to && err instanceof NatsBrokerUnavailableError && !isNoResponders(err.cause);
  if (!sent.stored && !unanswered) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PublishUnconfirmedError(message, { cause: err });
}

/** The JetStream storage of `historyStorage`; anything else is refused where the broker is made. */
function storageOf(historyStorage: unknown): StorageType {
  if (historyStorage === undefined || historyStorage === 'file') return StorageType.File;
  if (historyStorage === 'memory') return StorageType.Memory;
  throw new TypeError(
    `NATS broker historyStorage must be "file" or "memory", got ${JSON.stringify(historyStorage)}`,
  );
}
