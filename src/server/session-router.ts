import type { Logger } from '../peer/logger.js';
import type { Params } from '../protocol/types.js';
import type { Broker, Retention } from '../pubsub/broker.js';

/** Directed messages need no history: whoever is not connected now is not addressed. */
const DIRECT: Retention = { maxLength: 1, maxAgeMs: 60_000 };

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

/**
 * Reaching a session or a user wherever they are connected. Every gateway
 * listens on a broker topic of its own (`$node.<id>`, the prefix of its session
 * ids) and on `$user.<name>` for each user with a session on it; a message for
 * a session elsewhere, or for a user, goes through the broker.
 */
export class SessionRouter {
  private readonly users = new Map<string, number>();
  private started = false;

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
    await this.broker.subscribe(`$node.${this.nodeId}`, (message) => this.receive(message.payload));
  }

  async stop(): Promise<void> {
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

  /** A session of `user` opened here: listen for messages to that user. */
  userConnected(user: string): void {
    const count = this.users.get(user) ?? 0;
    this.users.set(user, count + 1);
    if (count > 0) return;
    this.broker
      .subscribe(`$user.${user}`, (message) => this.receive(message.payload))
      .catch((err: unknown) =>
        this.logger.warn({ err, user }, 'could not listen for user messages'),
      );
  }

  userDisconnected(user: string): void {
    const count = this.users.get(user) ?? 0;
    if (count > 1) {
      this.users.set(user, count - 1);
      return;
    }
    this.users.delete(user);
    this.broker.unsubscribe(`$user.${user}`).catch(() => undefined);
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
