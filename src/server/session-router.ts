import type { Logger } from '../peer/logger.js';
import type { Params } from '../protocol/types.js';
import type { Broker, Retention } from '../pubsub/broker.js';

/** Directed messages need no history: whoever is not connected now is not addressed. */
const DIRECT: Retention = { maxLength: 1, maxAgeMs: 60_000 };

/** Listening for a user that failed (the broker was down) is tried again after this, doubling. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

interface Directed {
  session?: string;
  user?: string;
  method: string;
  params?: Params;
}

export interface LocalSessions {
  /** Notify one local session; false when no such session is here. */
  notifySession(sessionId: string, method: string, params: Params | undefined): boolean;
  /** Notify every local session of a user; returns how many. */
  notifyUser(user: string, method: string, params: Params | undefined): number;
}

/** This node's listening for one user's messages (`$user.<name>`), shared by their sessions. */
interface UserListener {
  sessions: number;
  /** Settles once the broker has the subscription, or once an attempt failed (retried later). */
  ready: Promise<void>;
}

/**
 * Reaching a session or a user wherever they are connected. Every gateway
 * listens on a broker topic of its own (`$node.<id>`, the prefix of its session
 * ids) and on `$user.<name>` for each user with a session on it; a message for
 * a session elsewhere, or for a user, goes through the broker.
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

  constructor(
    private readonly broker: Broker,
    readonly nodeId: string,
    private readonly local: LocalSessions,
    private readonly logger: Logger,
  ) {}

  /** Start listening for messages addressed to this node's sessions. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopped = false;
    try {
      await this.broker.subscribe(`$node.${this.nodeId}`, (message) =>
        this.receive(message.payload),
      );
    } catch (err) {
      this.started = false; // a later start() tries again
      throw err;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.retrying.clear();
    if (!this.started) return;
    this.started = false;
    await this.broker.unsubscribe(`$node.${this.nodeId}`).catch(() => undefined);
  }

  /** Notify a session on any node. Resolves true when delivered here, or handed to the broker. */
  async notifySession(sessionId: string, method: string, params?: Params): Promise<boolean> {
    if (this.local.notifySession(sessionId, method, params)) return true;
    const node = sessionId.slice(0, sessionId.lastIndexOf('-'));
    if (!node || node === this.nodeId) return false;
    await this.broker.publish(
      `$node.${node}`,
      JSON.stringify({ session: sessionId, method, params }),
      DIRECT,
    );
    return true;
  }

  /** Notify every session of `user`, on every node (this one included, through the broker). */
  async notifyUser(user: string, method: string, params?: Params): Promise<void> {
    await this.broker.publish(`$user.${user}`, JSON.stringify({ user, method, params }), DIRECT);
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
    const listener: UserListener = { sessions: 1, ready: Promise.resolve() };
    this.users.set(user, listener);
    listener.ready = this.listen(user, listener);
  }

  userDisconnected(user: string): void {
    const listener = this.users.get(user);
    if (!listener) return;
    if (--listener.sessions > 0) return;
    this.users.delete(user);
    this.retrying.delete(user);
    // Even after a failed subscribe: it may have reached the broker all the same (idempotent).
    this.broker.unsubscribe(`$user.${user}`).catch(() => undefined);
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
    const topic = `$user.${user}`;
    try {
      await this.broker.subscribe(topic, (message) => this.receive(message.payload));
    } catch (err) {
      if (this.users.get(user) !== listener) return;
      this.logger.warn({ err, user }, 'could not listen for user messages: retrying');
      this.retrying.add(user);
      this.scheduleRetry();
      return;
    }
    if (this.users.get(user) !== listener) {
      // Every session of the user left meanwhile (and none came back): let go.
      if (!this.users.has(user)) this.broker.unsubscribe(topic).catch(() => undefined);
      return;
    }
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

  private receive(payload: string): void {
    let message: Directed;
    try {
      message = JSON.parse(payload) as Directed;
    } catch {
      return;
    }
    if (typeof message.method !== 'string') return;
    if (typeof message.session === 'string') {
      this.local.notifySession(message.session, message.method, message.params);
    } else if (typeof message.user === 'string') {
      this.local.notifyUser(message.user, message.method, message.params);
    }
  }
}
