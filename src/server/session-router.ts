import type { Logger } from '../peer/logger.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { ServerError } from '../protocol/errors.js';
import type { Params } from '../protocol/types.js';
import { assertEncodableParams } from './session.js';
import { PublishUnconfirmedError, TopicCreationLimitError } from '../pubsub/broker.js';
import type { Broker, BrokerMessage, Retention } from '../pubsub/broker.js';
import {
  DEFAULT_SESSION_DENY_FOR_MS,
  SessionDenyListFullError,
} from '../pubsub/session-deny-list.js';
import type { SubscribeRequest } from '../pubsub/subscribe-params.js';

/** Directed messages need no history: whoever is not connected now is not addressed. */
const DIRECT: Retention = { maxLength: 1, maxAgeMs: 60_000 };

/** Listening for a user that failed (the broker was down) is tried again after this, doubling. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

/** The name a session subscribes to for its own user's inbox (GatewayOptions.userInbox). */
export const INBOX_SUBSCRIPTION = '$inbox';

/**
 * Where a user's inbox lives on the broker: `~inbox.<user>`. Not a `$` name, since brokers
 * keep no history for those; clients cannot subscribe to it by name (PubSubService).
 */
export const INBOX_TOPIC_PREFIX = '~inbox.';

export function inboxTopic(user: string): string {
  return INBOX_TOPIC_PREFIX + user;
}

/**
 * The topic or stream subscribe params name (`["prices", ...]` or `{ "topic": "prices" }`), or
 * undefined when they name none; never throws (readSubscribeParams is the strict reading).
 */
export function subscribeTopicOf(params: Params | undefined): string | undefined {
  const name = Array.isArray(params)
    ? (params as unknown[])[0]
    : (params as { topic?: unknown } | undefined)?.topic;
  return typeof name === 'string' && name.length > 0 ? name : undefined;
}

/** Whether subscribe params (`["$inbox", ...]` or `{ "topic": "$inbox" }`) name the inbox. */
export function namesInbox(params: Params | undefined): boolean {
  return subscribeTopicOf(params) === INBOX_SUBSCRIPTION;
}

/**
 * -32009 Broker unavailable for a broker operation that failed (the broker is down or
 * refused). The cause (which may name the broker's host and port) goes to the log, and to the
 * caller only with `exposeErrorDetails`.
 */
export function brokerUnavailable(
  logger: Logger,
  exposeErrorDetails: boolean,
  err: unknown,
  what: string,
  data: Record<string, unknown>,
  logged: Record<string, unknown> = data,
): ServerError {
  logger.warn({ err, ...logged }, `broker unavailable: ${what}`);
  const told: Record<string, unknown> = { ...data };
  if (exposeErrorDetails) told['reason'] = err instanceof Error ? err.message : String(err);
  return new ServerError(
    ErrorCode.BrokerUnavailable,
    `Broker unavailable: ${what}`,
    Object.keys(told).length > 0 ? told : undefined,
  );
}

interface Directed {
  session?: string;
  user?: string;
  method: string;
  params?: Params;
  /** A revocation (gateway.revokeUser, revokeSession) instead of a notification. */
  revoke?: Revocation;
  /** A message of the node channel (openChannel) instead of a notification. */
  channel?: unknown;
  /** A server-side join or leave, or its answer (src/server/membership.ts), instead of a notification. */
  member?: unknown;
}

/**
 * Every node with an open node channel listens on this topic: what a node sends to all the
 * others (the server API's subscriber counts and calls to a user's sessions).
 */
export const NODES_TOPIC = '$nodes';

/**
 * Messages between the gateways sharing a broker, for a layer above (the server API's
 * request/reply): to one node through its own topic (`$node.<id>`), or to every node.
 * Delivered at most once, to the nodes connected now; nothing is kept.
 */
export interface NodeChannel {
  /** This node's id: the other nodes reply to it with `send(nodeId, ...)`. */
  readonly nodeId: string;
  /**
   * Send `body` (JSON-serializable) to one node, or to every node, this one included, when
   * `node` is undefined. Rejects with -32009 when the broker did not take it.
   */
  send(node: string | undefined, body: unknown): Promise<void>;
  /** Stop receiving (and listening on NODES_TOPIC). */
  close(): Promise<void>;
}

/**
 * Every node listens on this topic for revoked users (gateway.revokeUser): a user's sessions
 * may be on any node, and a node not listening for the user (`$user.<name>`, or its inbox with
 * user inboxes) must still close them.
 */
export const REVOKE_TOPIC = '$revoke';

/** One revocation as it travels between nodes: whose sessions, why, and when it was made. */
export interface Revocation {
  session?: string;
  user?: string;
  reason: string;
  /** When it was made (ms since the epoch): sessions with credentials issued later stay. */
  revokedAt: number;
  /** The node that made it, which has closed its own sessions already. */
  origin: string;
}

/** One message of a user's inbox, as the sessions that take it plain need it. */
export interface InboxMessage {
  seq: number;
  epoch: string | undefined;
  method: string;
  params: Params | undefined;
}

/** The `{ method, params }` an inbox message carries; undefined when it is not one. */
export function decodeInboxMessage(message: BrokerMessage): InboxMessage | undefined {
  let body: { method?: unknown; params?: unknown } | null;
  try {
    body = JSON.parse(message.payload) as { method?: unknown; params?: unknown } | null;
  } catch {
    return undefined;
  }
  if (typeof body?.method !== 'string') return undefined;
  const params = body.params;
  // Held to what a notification may carry, once per message: the broker is written by other
  // nodes and whatever else reaches it, which this node's own checks never saw.
  if (params !== undefined && (typeof params !== 'object' || params === null)) return undefined;
  try {
    assertEncodableParams(params as Params | undefined);
  } catch {
    return undefined;
  }
  return {
    seq: message.seq,
    epoch: message.epoch,
    method: body.method,
    params: body.params as Params | undefined,
  };
}

export interface LocalSessions {
  /** Notify one local session (params already held to MAX_ENCODED_DEPTH); false when no such session is here. */
  notifySession(sessionId: string, method: string, params: Params | undefined): boolean;
  /** Notify every local session of a user; returns how many. */
  notifyUser(user: string, method: string, params: Params | undefined): number;
  /** A message of a user's inbox: to the user's local sessions that take it plain. */
  deliverInbox?(user: string, message: BrokerMessage): void;
}

/** What the router needs for user inboxes: their retention, and the node's topic holds. */
export interface RouterInbox {
  retention: Retention;
  /**
   * Keep the topic subscribed on this node (TopicRegistry.hold, shared with the `$inbox`
   * subscriptions of the user's sessions): one broker subscription per topic per node.
   */
  hold(topic: string): Promise<void>;
  release(topic: string): void;
}

export interface SessionRouterOptions {
  /** Put the broker's error in the data of -32009 (GatewayOptions.exposeErrorDetails). */
  exposeErrorDetails?: boolean;
  /** Set when the gateway keeps user inboxes (GatewayOptions.userInbox). */
  inbox?: RouterInbox;
  /** Close this node's sessions a revocation names; returns how many it closed. */
  revoked?: (revocation: Revocation) => number;
  /** Server-side joins and leaves between nodes, and their answers (sendMember). */
  member?: (body: unknown) => void;
  /**
   * The broker's link is back (Broker.onRelinked) while the router runs: the revocations sent
   * while it was down never arrive, so what they said is read again (Revocations.recheck).
   * Resolves false when it could not all be read: called again after a backoff (250 ms,
   * doubling, up to 5 s) until it resolves true, and at the next return of the link.
   */
  relinked?: () => Promise<boolean>;
}

/** This node's listening for one user's messages (`$user.<name>` or the inbox), shared by their sessions. */
interface UserListener {
  sessions: number;
  /** Settles once the broker has the subscription, or once an attempt failed (retried later). */
  ready: Promise<void>;
  /** The inbox topic is held for this listener (to be released exactly once). */
  held: boolean;
}

/**
 * Reaching a session or a user wherever they are connected. Every gateway
 * listens on a broker topic of its own (`$node.<id>`, the prefix of its session
 * ids) and on `$user.<name>` for each user with a session on it; a message for
 * a session elsewhere, or for a user, goes through the broker.
 *
 * With user inboxes, a user's messages go to a numbered topic with history instead
 * (`~inbox.<name>`), which this node holds through its TopicRegistry while the user has a
 * session here: the `$inbox` subscriptions of the user's sessions share that one broker
 * subscription, and the user's other sessions get each message as a plain notification.
 *
 * A user subscription that fails (the broker is down when the session opens) is retried,
 * with backoff, until it is in place or the user's last session here has gone.
 */
export class SessionRouter {
  private readonly users = new Map<string, UserListener>();
  /** Users whose subscription failed and waits for the next retry. */
  private readonly retrying = new Set<string>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay = RETRY_MIN_MS;
  private started = false;
  /** After stop(): no retry is scheduled any more. */
  private stopped = false;
  /** Receives the node channel's messages while one is open (openChannel). */
  private channel: ((body: unknown) => void) | undefined;
  /** Stops the broker's onRelinked calls (while started). */
  private unlisten: (() => void) | undefined;
  /** The `relinked` option running, one at a time. */
  private relinkRun: Promise<void> | undefined;
  /** The link came back during a run: another follows it. */
  private relinkAgain = false;
  private relinkTimer: NodeJS.Timeout | undefined;
  private relinkDelay = RETRY_MIN_MS;
  /** This node's own topics the broker has the subscription of (`$node.<id>`, `$revoke`). */
  private readonly nodeTopics = new Set<string>();
  /** The next try at this node's own topics, after one failed (listenForNode). */
  private nodeTimer: NodeJS.Timeout | undefined;
  private nodeDelay = RETRY_MIN_MS;
  /** A retried try at this node's own topics is under way (listenForNode(true)). */
  private nodeRetrying = false;

  constructor(
    private readonly broker: Broker,
    readonly nodeId: string,
    private readonly local: LocalSessions,
    private readonly logger: Logger,
    private readonly options: SessionRouterOptions = {},
  ) {}

  /**
   * Start listening for messages addressed to this node's sessions. Resolves once tried: when
   * the broker cannot take the subscriptions (its link is down as the node starts), they are
   * tried again with backoff until it can (`listening` says when), and what was said to the
   * node meanwhile is read then as after an outage (the `relinked` option).
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopped = false;
    if (this.broker.onRelinked) {
      this.unlisten = this.broker.onRelinked(() => {
        // The link is back: the node's own subscriptions, still missing, are tried now, not at
        // the next retry; once in place, that try reads what was said meanwhile (relinked), so
        // it is not read twice.
        if (this.nodeTimer !== undefined) {
          clearTimeout(this.nodeTimer);
          this.nodeTimer = undefined;
          void this.listenForNode(true);
          return;
        }
        // A retried try under way reads it once it succeeds, likewise.
        if (this.options.relinked && !this.nodeRetrying) this.relinked();
      });
    }
    await this.listenForNode(false);
  }

  /** True once the broker has this node's own subscriptions (start), until stop. */
  get listening(): boolean {
    return this.nodeTopics.size === (this.options.revoked ? 2 : 1);
  }

  /** Started, and the broker has not taken this node's own subscriptions yet (tried again). */
  get pending(): boolean {
    return this.started && !this.listening;
  }

  /** Subscribe this node's own topics not subscribed yet; on failure, again after a delay. */
  private async listenForNode(retried: boolean): Promise<void> {
    const topics = [`$node.${this.nodeId}`];
    if (this.options.revoked) topics.push(REVOKE_TOPIC);
    this.nodeRetrying = retried;
    try {
      for (const topic of topics) {
        if (this.nodeTopics.has(topic)) continue;
        await this.broker.subscribe(topic, (message) => this.receive(message.payload));
        if (this.stopped) {
          await this.broker.unsubscribe(topic).catch(() => undefined);
          return;
        }
        this.nodeTopics.add(topic);
      }
    } catch (err) {
      this.nodeRetrying = false;
      if (this.stopped) return;
      this.logger.warn(
        { err, retryInMs: this.nodeDelay },
        'could not subscribe to messages for this node: retrying',
      );
      this.nodeTimer = setTimeout(() => {
        this.nodeTimer = undefined;
        void this.listenForNode(true);
      }, this.nodeDelay);
      this.nodeTimer.unref();
      this.nodeDelay = Math.min(this.nodeDelay * 2, RETRY_MAX_MS);
      return;
    }
    this.nodeDelay = RETRY_MIN_MS;
    this.nodeRetrying = false;
    if (retried) {
      this.logger.info('subscribed to messages for this node');
      // Revocations said while the node could not hear them: read as after an outage.
      if (this.options.relinked) this.relinked();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    clearTimeout(this.nodeTimer);
    this.nodeTimer = undefined;
    this.nodeDelay = RETRY_MIN_MS;
    this.nodeRetrying = false;
    this.retrying.clear();
    this.unlisten?.();
    this.unlisten = undefined;
    clearTimeout(this.relinkTimer);
    this.relinkTimer = undefined;
    this.relinkAgain = false;
    if (!this.started) return;
    this.started = false;
    const topics = [...this.nodeTopics];
    this.nodeTopics.clear();
    for (const topic of topics) await this.broker.unsubscribe(topic).catch(() => undefined);
  }

  /**
   * Close a session on any node (gateway.revokeSession): here at once, or through the broker
   * to the node its id names. For another node, a broker with `denySession` keeps a record of
   * the revocation for `keepForMs` first, which that node reads when its link is back
   * (Revocations.recheck): the message is lost while its link is down. Resolves false when it
   * is not here and its id names no other node; rejects with -32009 when the broker did not
   * take the record or the message, with SessionDenyListFullError when its records are at
   * their bound.
   */
  async revokeSession(
    revocation: Revocation & { session: string },
    keepForMs = DEFAULT_SESSION_DENY_FOR_MS,
  ): Promise<boolean> {
    if ((this.options.revoked?.(revocation) ?? 0) > 0) return true;
    const sessionId = revocation.session;
    const dash = sessionId.lastIndexOf('-');
    const node = dash > 0 ? sessionId.slice(0, dash) : this.nodeId;
    if (node === this.nodeId) return false;
    await this.recordRevokedSession(node, revocation, keepForMs);
    const payload = JSON.stringify({ method: '', revoke: revocation });
    await this.publish(`$node.${node}`, payload, DIRECT, { session: sessionId });
    return true;
  }

  /** Broker.denySession, when the broker has it (see revokeSession). */
  private async recordRevokedSession(
    node: string,
    revocation: Revocation & { session: string },
    keepForMs: number,
  ): Promise<void> {
    const { broker } = this;
    if (!broker.denySession || !broker.deniedSessions) return;
    const { session, revokedAt, reason } = revocation;
    try {
      // Through a promise, so a broker that throws synchronously fails like one that rejects.
      await Promise.resolve().then(() =>
        broker.denySession!(node, session, revokedAt, keepForMs, reason),
      );
    } catch (err) {
      if (err instanceof SessionDenyListFullError) throw err;
      throw brokerUnavailable(
        this.logger,
        this.options.exposeErrorDetails ?? false,
        err,
        'the session was not revoked',
        { session },
      );
    }
  }

  /**
   * Close a user's sessions on every node (gateway.revokeUser): this node's at once, the
   * others' through the broker. Resolves with how many were closed here; rejects with -32009
   * when the broker did not take the message (this node's are closed regardless).
   */
  async revokeUser(revocation: Revocation & { user: string }): Promise<number> {
    const closed = this.options.revoked?.(revocation) ?? 0;
    const payload = JSON.stringify({ method: '', revoke: revocation });
    await this.publish(REVOKE_TOPIC, payload, DIRECT, { user: revocation.user });
    return closed;
  }

  /**
   * Notify a session on any node, at most once (a session is one connection). Resolves true
   * when delivered here, or handed to the broker; rejects with -32009 when the broker did not
   * take it.
   */
  async notifySession(sessionId: string, method: string, params?: Params): Promise<boolean> {
    if (this.local.notifySession(sessionId, method, params)) return true;
    const node = sessionId.slice(0, sessionId.lastIndexOf('-'));
    if (!node || node === this.nodeId) return false;
    const payload = JSON.stringify({ session: sessionId, method, params });
    await this.publish(`$node.${node}`, payload, DIRECT, { session: sessionId });
    return true;
  }

  /**
   * Notify every session of `user`, on every node (this one included, through the broker).
   * With user inboxes, resolves with the message's number in the user's inbox. Rejects with
   * -32009 when the broker did not take it, and with -32003 when the user's inbox is not on the
   * broker yet and the node's budget for new topics (newTopicsPerSecond) is spent.
   */
  async notifyUser(user: string, method: string, params?: Params): Promise<number | undefined> {
    const inbox = this.options.inbox;
    if (inbox) {
      const payload = JSON.stringify({ method, params });
      return this.publish(inboxTopic(user), payload, inbox.retention, { user });
    }
    const payload = JSON.stringify({ user, method, params });
    await this.publish(`$user.${user}`, payload, DIRECT, { user });
    return undefined;
  }

  /**
   * Open the node channel (one per router): `receive` gets every message sent to this node or
   * to all nodes. Resolves once this node listens on NODES_TOPIC; messages to its own topic
   * arrive once the router has started.
   */
  async openChannel(receive: (body: unknown) => void): Promise<NodeChannel> {
    if (this.channel) throw new Error('the node channel is open already');
    this.channel = receive;
    const listen = (message: BrokerMessage): void => this.receive(message.payload);
    try {
      await this.broker.subscribe(NODES_TOPIC, listen);
    } catch (err) {
      this.channel = undefined;
      throw err;
    }
    let open = true;
    return {
      nodeId: this.nodeId,
      send: async (node, body) => {
        const topic = node === undefined ? NODES_TOPIC : `$node.${node}`;
        const payload = JSON.stringify({ method: '', channel: body });
        await this.publish(topic, payload, DIRECT, { node: node ?? 'all' });
      },
      close: async () => {
        if (!open) return;
        open = false;
        if (this.channel === receive) this.channel = undefined;
        await this.broker.unsubscribe(NODES_TOPIC).catch(() => undefined);
      },
    };
  }

  /**
   * A server-side join or leave (or its answer) to `node`, delivered to its `member` option.
   * Rejects with -32009 when the broker did not take it.
   */
  async sendMember(node: string, body: unknown): Promise<void> {
    const payload = JSON.stringify({ method: '', member: body });
    await this.publish(`$node.${node}`, payload, DIRECT, { node });
  }

  /** A message of a user's inbox, from this node's broker subscription (see RouterInbox). */
  inboxReceived(message: BrokerMessage): void {
    if (!message.topic.startsWith(INBOX_TOPIC_PREFIX)) return;
    this.local.deliverInbox?.(message.topic.slice(INBOX_TOPIC_PREFIX.length), message);
  }

  private async publish(
    topic: string,
    payload: string,
    retention: Retention,
    logged: Record<string, unknown>,
  ): Promise<number> {
    try {
      // Through a promise, so a broker that throws synchronously fails like one that rejects.
      return await Promise.resolve().then(() => this.broker.publish(topic, payload, retention));
    } catch (err) {
      // A user's first inbox message makes a topic: past the node's budget for new topics the
      // broker is up, and worth trying again later, as gateway.publish tells it.
      if (err instanceof TopicCreationLimitError) {
        throw new ServerError(
          ErrorCode.RateLimited,
          'Too many new topics: the message was not sent',
          {
            newTopicsPerSecond: err.perSecond,
          },
        );
      }
      // A JsonRpcError, so a handler that returns notifyUser's promise answers precisely. The
      // broker tells a message that may have reached it (PublishUnconfirmedError: an inbox
      // message stored, a message to a session or user passed on, its answer lost): "was not
      // sent" only where it surely was not.
      throw brokerUnavailable(
        this.logger,
        this.options.exposeErrorDetails ?? false,
        err,
        err instanceof PublishUnconfirmedError
          ? 'the message may have been sent'
          : 'the message was not sent',
        {},
        logged,
      );
    }
  }

  /**
   * A session of `user` opens here: listen for messages to that user (see `listeningFor`).
   * Pair every call with one `userDisconnected`.
   */
  userConnected(user: string): void {
    const existing = this.users.get(user);
    if (existing) {
      existing.sessions++;
      return;
    }
    const listener: UserListener = { sessions: 1, ready: Promise.resolve(), held: false };
    this.users.set(user, listener);
    listener.ready = this.listen(user, listener);
  }

  userDisconnected(user: string): void {
    const listener = this.users.get(user);
    if (!listener) return;
    if (--listener.sessions > 0) return;
    this.users.delete(user);
    this.retrying.delete(user);
    const inbox = this.options.inbox;
    if (inbox) {
      // A hold still on its way is released by `listen` when it lands.
      if (listener.held) inbox.release(inboxTopic(user));
      listener.held = false;
      return;
    }
    // Even after a failed subscribe: it may have reached the broker all the same (idempotent).
    this.broker.unsubscribe(`$user.${user}`).catch(() => undefined);
  }

  /**
   * `userConnected(user)`, then `listeningFor(user)`: what a session of `user` waits for
   * before it opens (ConnectionIntake, in-band authentication). Release with `userDisconnected`.
   */
  async holdUser(user: string): Promise<void> {
    this.userConnected(user);
    await this.listeningFor(user);
  }

  /**
   * Resolves, after `userConnected(user)`, once the broker has this node's subscription for
   * the user (true), or once the attempt failed (false; it is retried until it works). A
   * gateway that waits for it before letting a session of the user in guarantees that a
   * `notifyUser` sent after the session's first answer reaches it. Never rejects.
   */
  async listeningFor(user: string): Promise<boolean> {
    const listener = this.users.get(user);
    if (!listener) return false;
    await listener.ready;
    return this.users.get(user) === listener && !this.retrying.has(user);
  }

  private async listen(user: string, listener: UserListener): Promise<void> {
    const inbox = this.options.inbox;
    const topic = inbox ? inboxTopic(user) : `$user.${user}`;
    try {
      if (inbox) await inbox.hold(topic);
      else await this.broker.subscribe(topic, (message) => this.receive(message.payload));
    } catch (err) {
      if (this.users.get(user) !== listener) return;
      this.logger.warn({ err, user }, 'could not listen for user messages: retrying');
      this.retrying.add(user);
      this.scheduleRetry();
      return;
    }
    if (this.users.get(user) !== listener) {
      // Every session of the user left meanwhile (and none came back, or a new listener has
      // its own hold): let go.
      if (inbox) inbox.release(topic);
      else if (!this.users.has(user)) this.broker.unsubscribe(topic).catch(() => undefined);
      return;
    }
    listener.held = inbox !== undefined;
    this.retryDelay = RETRY_MIN_MS;
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped || this.retrying.size === 0) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.retryFailed();
    }, this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(this.retryDelay * 2, RETRY_MAX_MS);
  }

  private retryFailed(): void {
    if (this.retrying.size === 0) return; // everyone it was for has left
    if (!this.broker.ready) {
      this.scheduleRetry();
      return;
    }
    const users = [...this.retrying];
    this.retrying.clear();
    for (const user of users) {
      const listener = this.users.get(user);
      if (listener) listener.ready = this.listen(user, listener);
    }
  }

  /** The broker's link is back: run the `relinked` option (one run at a time, see there). */
  private relinked(): void {
    clearTimeout(this.relinkTimer);
    this.relinkTimer = undefined;
    if (this.stopped || !this.started) return;
    if (this.relinkRun) {
      this.relinkAgain = true;
      return;
    }
    this.relinkRun = this.runRelinked();
  }

  private async runRelinked(): Promise<void> {
    let complete = false;
    try {
      complete = await this.options.relinked!();
    } catch (err) {
      this.logger.error({ err }, 'reading revocations again after a broker outage failed');
    }
    this.relinkRun = undefined;
    if (this.stopped || !this.started) return;
    if (this.relinkAgain) {
      this.relinkAgain = false;
      this.relinked();
      return;
    }
    if (complete) this.relinkDelay = RETRY_MIN_MS;
    else this.retryRelinked();
  }

  /** The next run of `relinked` after the backoff, once the broker is ready. */
  private retryRelinked(): void {
    this.relinkTimer = setTimeout(() => {
      this.relinkTimer = undefined;
      if (this.broker.ready) this.relinked();
      else this.retryRelinked();
    }, this.relinkDelay);
    this.relinkTimer.unref();
    this.relinkDelay = Math.min(this.relinkDelay * 2, RETRY_MAX_MS);
  }

  private receive(payload: string): void {
    let message: Directed;
    try {
      message = JSON.parse(payload) as Directed;
    } catch {
      return;
    }
    if (message.channel !== undefined) {
      this.channel?.(message.channel);
      return;
    }
    if (message.member !== undefined) {
      this.options.member?.(message.member);
      return;
    }
    if (typeof message.revoke === 'object' && message.revoke !== null) {
      const revocation = message.revoke;
      if (revocation.origin !== this.nodeId) this.options.revoked?.(revocation);
      return;
    }
    if (typeof message.method !== 'string') return;
    try {
      // Held here, once, to what any connection can be sent: a node may not have checked it.
      assertEncodableParams(message.params);
    } catch (err) {
      this.logger.warn({ err, method: message.method }, 'directed message not delivered');
      return;
    }
    if (typeof message.session === 'string') {
      this.local.notifySession(message.session, message.method, message.params);
    } else if (typeof message.user === 'string') {
      this.local.notifyUser(message.user, message.method, message.params);
    }
  }
}

/** Where one session of a user is with the user's messages (see SessionInbox). */
type InboxMode = 'undecided' | 'plain' | 'claiming' | 'inbox';

/**
 * How one session of a user takes the user's messages when the gateway keeps user inboxes.
 * A session that subscribes `$inbox` gets them through that subscription, numbered, and
 * resumes them on its next connection; the user's other sessions (third-party clients)
 * get each one as a plain notification, as without inboxes.
 *
 * A new session cannot be told apart until its first call: a client that resumes its inbox
 * would otherwise get messages plain before its `$inbox` subscribe and the same ones again,
 * before the ones it missed, from the resume. So until its first call (or `holdMs` after it
 * opened) the user's messages are held for it: a `$inbox` subscribe starts from the first of
 * them (unless it resumes from its own `since`); anything else gets them plain.
 *
 * Modes: `undecided` (held, at most `maxHeld`, for at most `holdMs`), `plain` (notified),
 * `claiming` (`$inbox` subscribes are on their way: held, as undecided, until one of them has
 * started and answered), `inbox` (a subscription delivers; nothing here). When every `$inbox`
 * subscribe on its way fails, before or after it started, what was held comes back: sent plain
 * if the session took its messages plain before, else held again for `holdMs`, so a retried
 * `$inbox` subscribe starts from the first of them and any other call gets them plain.
 */
export class SessionInbox {
  private mode: InboxMode = 'undecided';
  private held: InboxMessage[] = [];
  /** The first message held since the session opened or claimed the inbox. */
  private firstHeld: { seq: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Epoch ms until which an undecided session's messages are held. */
  private holdUntil: number;
  /** Some of the user's messages went to it plain (its first call was not a `$inbox` subscribe). */
  private sentPlain = false;
  /** The session took its messages plain when its `$inbox` subscribes began. */
  private claimedFromPlain = false;
  /** `$inbox` subscribes claimed and not yet answered (`confirmed` or `failed`). */
  private claims = 0;
  private closed = false;

  constructor(
    private readonly session: {
      notifyChecked(method: string, params: Params | undefined): void;
      readonly isClosed: boolean;
      logger: Logger;
    },
    private readonly holdMs: number,
    private readonly maxHeld: number,
  ) {
    this.holdUntil = Date.now() + holdMs;
  }

  /** Not yet told how the session takes its messages: its next call says. */
  get undecided(): boolean {
    return this.mode === 'undecided';
  }

  /** Whether messages need to be offered (a session in `inbox` mode gets them elsewhere). */
  get wantsMessages(): boolean {
    return this.mode !== 'inbox';
  }

  /**
   * The session's first call that is not a `$inbox` subscribe: its messages go plain from
   * here. A `$inbox` subscribe decides when its handler takes it (`claim`): one sent as a
   * notification, refused by the authorize hook or malformed leaves the session undecided.
   */
  firstCall(): void {
    if (this.mode === 'undecided') this.goPlain();
  }

  /** One message of the user's inbox that the registry did not deliver to this session. */
  offer(message: InboxMessage): void {
    switch (this.mode) {
      case 'inbox':
        return;
      case 'plain':
        this.sendPlain(message);
        return;
      case 'claiming':
        this.hold(message);
        return;
      case 'undecided': {
        if (Date.now() >= this.holdUntil) {
          this.goPlain();
          this.sendPlain(message);
          return;
        }
        this.hold(message);
        this.timer ??= this.holdTimer();
        return;
      }
    }
  }

  /**
   * A `$inbox` subscribe reached its handler: no more plain messages while it is on its way.
   * Pair with `confirmed` (it was answered with its subscription) or `failed`.
   */
  claim(): void {
    if (this.closed) return;
    this.claims++;
    if (this.mode === 'inbox' || this.mode === 'claiming') return;
    this.claimedFromPlain = this.mode === 'plain';
    this.mode = 'claiming';
    this.clearTimer();
  }

  /**
   * The `$inbox` subscription joins the user's topic now, in this very turn. Returns where it
   * starts: before the first message held for the session (so nothing sent since the session
   * opened is missed), or from its own `since` when it resumes. What is held stays held until
   * the subscribe is answered: should it fail, the session has it still.
   */
  started(request: SubscribeRequest): SubscribeRequest {
    const first = this.firstHeld;
    if (request.since !== undefined && this.sentPlain) {
      this.session.logger.warn(
        { since: request.since },
        '$inbox resumed on a session that got user messages plain before it: some may arrive twice',
      );
    }
    if (request.since !== undefined || first === undefined) return request;
    // Replayed from there; the epoch is told with it, as a position would have told it.
    return { ...request, since: first.seq - 1, epoch: undefined, position: false };
  }

  /** A claimed `$inbox` subscribe was answered with its subscription: it delivers from here. */
  confirmed(): void {
    if (this.closed) return;
    this.claims = Math.max(0, this.claims - 1);
    this.mode = 'inbox';
    this.held = [];
    this.firstHeld = undefined;
    this.clearTimer();
  }

  /** A claimed `$inbox` subscribe failed, before or after it started (see the class). */
  failed(): void {
    if (this.closed) return;
    this.claims = Math.max(0, this.claims - 1);
    if (this.mode !== 'claiming' || this.claims > 0) return;
    if (this.claimedFromPlain) {
      this.goPlain();
      return;
    }
    this.mode = 'undecided';
    this.holdUntil = Date.now() + this.holdMs;
    this.timer ??= this.holdTimer();
  }

  /** The session closed: nothing held, no timer. */
  close(): void {
    this.closed = true;
    this.mode = 'inbox';
    this.held = [];
    this.firstHeld = undefined;
    this.clearTimer();
  }

  private hold(message: InboxMessage): void {
    this.firstHeld ??= { seq: message.seq };
    this.held.push(message);
    // Beyond the bound the oldest go: a plain session gets the user's messages at most once.
    if (this.held.length > this.maxHeld) this.held.shift();
  }

  /** Sends what is held plain once `holdUntil` passes with the session still undecided. */
  private holdTimer(): NodeJS.Timeout {
    const timer = setTimeout(
      () => {
        this.timer = undefined;
        if (this.mode === 'undecided') this.goPlain();
      },
      Math.max(0, this.holdUntil - Date.now()),
    );
    timer.unref();
    return timer;
  }

  private goPlain(): void {
    this.clearTimer();
    this.mode = 'plain';
    const held = this.held;
    this.held = [];
    this.firstHeld = undefined;
    for (const message of held) this.sendPlain(message);
  }

  private sendPlain(message: InboxMessage): void {
    this.sentPlain = true;
    // Held to MAX_ENCODED_DEPTH by decodeInboxMessage; sent from a timer too (goPlain), where
    // nothing may throw: a session closing meanwhile is sent nothing.
    if (!this.session.isClosed) this.session.notifyChecked(message.method, message.params);
  }

  private clearTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
