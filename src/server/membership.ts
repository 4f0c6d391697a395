// Server-side membership: the server subscribes a session to a topic (session.join) or ends its
// subscriptions to one (session.leave), on this node or, by session id, on the node that holds
// the session (gateway.join, gateway.leave: a request and its answer through the node topics of
// the session router). The subscription itself is the pub/sub service's, made as a subscribe
// would make it; the client is told of it by `rpc.joined` before its first frame.
import type { Logger } from '../peer/logger.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError, ServerError, isErrorObject, toWireError } from '../protocol/errors.js';
import { ConnectionClosedError, TimeoutError } from '../protocol/local-errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { ErrorObject } from '../protocol/types.js';
import type { Session } from './session.js';

/** How a server-side join starts. */
export interface JoinOptions {
  /** Replay the topic's messages after this seq first (from its history), as a resume does. */
  since?: number;
}

/** One session's way to join and leave topics (set by the gateway on each open session). */
export interface SessionMembership {
  join(topic: string, options?: JoinOptions): Promise<string>;
  leave(topic: string): boolean;
}

/**
 * The gateway's membership as every session holds it (one object for all of them): join and
 * leave take the session.
 */
export interface SharedMembership<C> {
  join(session: Session<C>, topic: string, options?: JoinOptions): Promise<string>;
  leave(session: Session<C>, topic: string): boolean;
  /** One session's view of it (SessionMembership). */
  of(session: Session<C>): SessionMembership;
}

/** The pub/sub service's part in it (PubSubService.joinTopic, leaveTopic). */
export interface MembershipTopics<C> {
  joinTopic(
    session: Session<C>,
    topic: string,
    since: number | undefined,
    announce: (id: string) => void,
  ): Promise<string>;
  leaveTopic(session: Session<C>, topic: string): boolean;
}

/** A join or leave for a session on another node, and its answer, as they travel. */
type Wire =
  | {
      t: 'join' | 'leave';
      id: string;
      from: string;
      session: string;
      topic: string;
      since?: number;
    }
  | { t: 'done'; id: string; done: boolean }
  | { t: 'done'; id: string; error: ErrorObject };

/** Joins and leaves awaiting another node's answer at once; beyond it one is refused. */
export const MAX_PENDING_MEMBERSHIP = 10_000;
/** How long a join or leave waits for the answer of the node holding the session. */
export const MEMBERSHIP_ANSWER_MS = 10_000;

export interface MembershipDeps<C> {
  topics: MembershipTopics<C>;
  /** This node's open sessions by id. */
  sessions: ReadonlyMap<string, Session<C>>;
  nodeId: string;
  /** To another node's `member` receiver (SessionRouter.sendMember). */
  send(node: string, body: Wire): Promise<void>;
  logger: Logger;
}

/** The node a session id names: `<nodeId>-<random part>`. */
function nodeOf(sessionId: string): string | undefined {
  const dash = sessionId.lastIndexOf('-');
  return dash > 0 ? sessionId.slice(0, dash) : undefined;
}

function checkTopic(topic: unknown): asserts topic is string {
  if (typeof topic !== 'string' || topic.length === 0) {
    throw new TypeError(`join/leave: topic must be a non-empty string, got ${typeof topic}`);
  }
}

function checkSince(since: unknown): asserts since is number | undefined {
  if (since !== undefined && !(Number.isSafeInteger(since) && (since as number) >= 0)) {
    throw new RangeError(
      `join: options.since must be a sequence number (an integer >= 0), got ${JSON.stringify(since) ?? typeof since}`,
    );
  }
}

export class Membership<C> {
  /** Joins under way per session and topic: a second join of the same one shares the first. */
  private readonly joining = new WeakMap<Session<C>, Map<string, Promise<string>>>();
  private readonly pending = new Map<
    string,
    { settle(answer: Wire | Error): void; timer: ReturnType<typeof setTimeout> }
  >();
  private nextId = 0;

  constructor(private readonly deps: MembershipDeps<C>) {}

  /**
   * Subscribe `session` to `topic` as its own subscribe would (authorized, counted, the same
   * frames), after telling it with `rpc.joined`. Resolves with the subscription id; a session
   * already subscribed to the topic keeps that subscription (its id). Rejects like a subscribe
   * (-32602, -32004, -32005, -32003, -32009), with ConnectionClosedError once it has closed.
   */
  join(session: Session<C>, topic: string, options: JoinOptions = {}): Promise<string> {
    try {
      checkTopic(topic);
      checkSince(options.since);
      if (session.isClosed) throw new ConnectionClosedError();
      if (!session.isAuthenticated) {
        throw new JsonRpcError(
          ErrorCode.Unauthenticated,
          'The connection has not authenticated yet',
        );
      }
    } catch (err) {
      return Promise.reject(err as Error);
    }
    let underWay = this.joining.get(session);
    const shared = underWay?.get(topic);
    if (shared) return shared;
    const since = options.since;
    const joined = this.deps.topics.joinTopic(session, topic, since, (subscription) =>
      session.notify(
        ReservedMethod.Joined,
        since === undefined ? { topic, subscription } : { topic, subscription, seq: since },
      ),
    );
    if (!underWay) this.joining.set(session, (underWay = new Map<string, Promise<string>>()));
    const table = underWay;
    table.set(topic, joined);
    const done = (): void => {
      if (table.get(topic) === joined) table.delete(topic);
    };
    joined.then(done, done);
    return joined;
  }

  /** End every subscription of `session` to `topic` with the stream-end `complete`; false when it had none. */
  leave(session: Session<C>, topic: string): boolean {
    checkTopic(topic);
    return this.deps.topics.leaveTopic(session, topic);
  }

  /**
   * `join` for a session on any node. Resolves true once it is subscribed, false when no such
   * session is open (here, or on the node its id names); rejects as `join` does, with -32009
   * when the broker did not take the request, and with TimeoutError when that node did not
   * answer within MEMBERSHIP_ANSWER_MS.
   */
  joinById(sessionId: string, topic: string, options: JoinOptions = {}): Promise<boolean> {
    try {
      checkTopic(topic);
      checkSince(options.since);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const local = this.deps.sessions.get(sessionId);
    if (local) return this.join(local, topic, options).then(() => true);
    return this.remote(sessionId, { t: 'join', topic, since: options.since });
  }

  /** `leave` for a session on any node: whether it had a subscription to end. */
  leaveById(sessionId: string, topic: string): Promise<boolean> {
    try {
      checkTopic(topic);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const local = this.deps.sessions.get(sessionId);
    if (local) return Promise.resolve(this.leave(local, topic));
    return this.remote(sessionId, { t: 'leave', topic });
  }

  /** What `session.join` and `session.leave` call. */
  of(session: Session<C>): SessionMembership {
    return new BoundMembership(this, session);
  }

  /** A message from another node (SessionRouterOptions.member). */
  receive(body: unknown): void {
    const wire = body as Wire;
    if (typeof wire !== 'object' || wire === null || typeof wire.id !== 'string') return;
    if (wire.t === 'done') {
      // Only an answer of the shape a node sends settles a request: anything else on the channel
      // is ignored (logged), and the request's timeout still runs.
      const answered = 'error' in wire ? isErrorObject(wire.error) : typeof wire.done === 'boolean';
      if (answered) this.pending.get(wire.id)?.settle(wire);
      else this.deps.logger.warn({ id: wire.id }, 'join/leave answer of no known shape: ignored');
      return;
    }
    if ((wire.t !== 'join' && wire.t !== 'leave') || typeof wire.from !== 'string') return;
    void this.answer(wire).then((answer) =>
      this.deps
        .send(wire.from, answer)
        .catch((err: unknown) =>
          this.deps.logger.warn({ err, topic: wire.topic }, 'join/leave answer not sent'),
        ),
    );
  }

  /** Settle every join and leave still waiting for another node (the gateway closes). */
  close(): void {
    for (const entry of [...this.pending.values()]) entry.settle(new ConnectionClosedError());
  }

  private async answer(wire: Wire & { t: 'join' | 'leave' }): Promise<Wire> {
    const session = this.deps.sessions.get(wire.session);
    try {
      if (!session) return { t: 'done', id: wire.id, done: false };
      if (wire.t === 'leave')
        return { t: 'done', id: wire.id, done: this.leave(session, wire.topic) };
      await this.join(session, wire.topic, { since: wire.since });
      return { t: 'done', id: wire.id, done: true };
    } catch (err) {
      if (err instanceof ConnectionClosedError) return { t: 'done', id: wire.id, done: false };
      if (!(err instanceof JsonRpcError)) {
        this.deps.logger.warn({ err, topic: wire.topic }, 'join/leave for another node failed');
      }
      return { t: 'done', id: wire.id, error: toWireError(err) };
    }
  }

  private remote(
    sessionId: string,
    request: { t: 'join' | 'leave'; topic: string; since?: number },
  ): Promise<boolean> {
    const node = nodeOf(sessionId);
    if (node === undefined || node === this.deps.nodeId) return Promise.resolve(false);
    if (this.pending.size >= MAX_PENDING_MEMBERSHIP) {
      return Promise.reject(
        new ServerError(
          ErrorCode.ServerBusy,
          `Too many joins and leaves awaiting another node: at most ${MAX_PENDING_MEMBERSHIP}`,
          { limit: MAX_PENDING_MEMBERSHIP },
        ),
      );
    }
    const id = `${this.deps.nodeId}:${(++this.nextId).toString(36)}`;
    return new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TimeoutError(`gateway.${request.t}`, MEMBERSHIP_ANSWER_MS));
      }, MEMBERSHIP_ANSWER_MS);
      timer.unref();
      this.pending.set(id, {
        timer,
        settle: (answer) => {
          clearTimeout(timer);
          this.pending.delete(id);
          if (answer instanceof Error) reject(answer);
          else if ('error' in answer) reject(JsonRpcError.fromErrorObject(answer.error));
          else if ('done' in answer) resolve(answer.done);
        },
      });
      const wire: Wire = { ...request, id, from: this.deps.nodeId, session: sessionId };
      this.deps.send(node, wire).catch((err: unknown) => {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err as Error);
      });
    });
  }
}

/**
 * One session's SessionMembership: the gateway's Membership with the session bound, as one
 * small object (two closures and their scope per session would weigh several times more).
 */
class BoundMembership<C> implements SessionMembership {
  constructor(
    private readonly membership: Membership<C>,
    private readonly session: Session<C>,
  ) {}

  join(topic: string, options?: JoinOptions): Promise<string> {
    return this.membership.join(this.session, topic, options);
  }

  leave(topic: string): boolean {
    return this.membership.leave(this.session, topic);
  }
}
