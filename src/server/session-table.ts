import { Subject } from 'rxjs';
import type { Observable } from 'rxjs';
import { AnsweringPeer } from '../peer/answering-peer.js';
import { childLoggerOf } from '../peer/lazy-child-logger.js';
import type { Logger } from '../peer/logger.js';
import { Peer } from '../peer/peer.js';
import type { CloseInfo, PeerConfig } from '../peer/peer.js';
import type { Params } from '../protocol/types.js';
import type { BrokerMessage } from '../pubsub/broker.js';
import type { ServerTransport } from '../transport/transport.js';
import type { Admission } from './admission.js';
import type { GatewayLimits } from './options.js';
import { Session } from './session.js';
import { sessionIdOf } from './session-id.js';
import { SessionInbox, decodeInboxMessage } from './session-router.js';
import type { InboxMessage, LocalSessions, SessionRouter } from './session-router.js';
import { RateLimit } from './token-bucket.js';

export interface SessionTableDeps<C> {
  /** This gateway's id among its peers: the prefix of its session ids. */
  nodeId: string;
  /** The gateway's logger: each session logs through a child of it. */
  logger: Logger;
  limits: Required<GatewayLimits>;
  /**
   * Frees a session's connection slot when it closes, and counts the sessions of each user
   * (`users`, limits.maxConnectionsPerUser) from its identity to its close; without `users`
   * they are not counted.
   */
  admission: Pick<Admission, 'release'> & Partial<Pick<Admission, 'users'>>;
  pubsub: { detach(session: Session<C>): void };
  /**
   * Told when a session of a user opens here and when it closes (the router listens for the
   * user's messages meanwhile). The router is built on the table (LocalSessions), so the
   * gateway hands it over lazily.
   */
  users: Pick<SessionRouter, 'userConnected' | 'userDisconnected'>;
  /**
   * Set when the gateway keeps user inboxes: each session of a user then gets a SessionInbox
   * (how long new sessions' messages are held, and at most how many).
   */
  inbox?: { holdMs: number; maxHeld: number } | undefined;
  /** Told of each session the table keeps, by its id (the heartbeat visits it from then on). */
  watch?: ((id: string) => void) | undefined;
}

/**
 * The sessions this gateway keeps: their ids, the index by user (for notifyUser), and the
 * connected/disconnected events. It exists so that opening and closing a session is done in
 * one place, in one order, whatever the transport it came over; admitting the connection
 * first is the intake's job.
 */
export class SessionTable<C> implements LocalSessions {
  /** Open sessions by id. */
  readonly live = new Map<string, Session<C>>();
  /** Local sessions by user (GatewayOptions.userOf), for notifyUser. */
  private readonly byUser = new Map<string, Set<Session<C>>>();
  private readonly idPrefix: string;
  /**
   * The remote address of the last session made: the next one from the same address (all of
   * them, behind a proxy or a NAT that is not a trusted proxy) holds this string rather than a
   * copy of its own: 32 bytes for an IPv4 address, up to 56 for an IPv6 one.
   */
  private lastAddress: string | undefined;
  /** The rate limit every session's bucket shares (limits.ratePerSecond, rateBurst). */
  private rateLimit: RateLimit | undefined;
  private readonly connectedSubject = new Subject<Session<C>>();
  private readonly disconnectedSubject = new Subject<Session<C>>();
  /** Emits each session once it is open. */
  readonly connected$: Observable<Session<C>> = this.connectedSubject.asObservable();
  /** Emits each session once it has closed and all its calls have settled. */
  readonly disconnected$: Observable<Session<C>> = this.disconnectedSubject.asObservable();

  constructor(private readonly deps: SessionTableDeps<C>) {
    this.idPrefix = `${deps.nodeId}-`;
  }

  /**
   * A session and its peer over `transport`, not kept in the table (an HTTP exchange's, or
   * one `open` is about to keep). Everything but these and the logger is shared.
   */
  create(
    transport: ServerTransport,
    context: C,
    remoteAddress: string | undefined,
    /**
     * The rate limit of its incoming messages: a shared RateLimit (the session then makes its
     * own bucket on its first message: Session.take), or a bucket of the caller's.
     */
    admit: RateLimit | { take(): boolean } | undefined,
    config: PeerConfig<Session<C>>,
  ): Session<C> {
    // The node's id, then a part nobody can guess from other sessions' ids. Ids are still not
    // capabilities (they are logged, and reach whoever a session shows its own to), so a
    // guessed id is no key; but notifySession takes any id, and counting them should not find one.
    const id = sessionIdOf(this.idPrefix);
    const logger = childLoggerOf(this.deps.logger, 'session', id);
    if (remoteAddress === this.lastAddress) remoteAddress = this.lastAddress;
    else this.lastAddress = remoteAddress;
    const session = new Session<C>(id, context, remoteAddress, logger, transport);
    // An HTTP exchange answers in its response (AnsweringPeer.answer); connections send.
    const PeerClass = transport.canPush ? Peer : AnsweringPeer;
    if (admit instanceof RateLimit) {
      session.limitRate(admit);
      admit = session;
    }
    session.peer = new PeerClass<Session<C>>(transport, { session, logger, admit }, config);
    return session;
  }

  /**
   * Open a session (a connection the gateway keeps) over an admitted transport of any kind.
   * `config` must close through `onClosed`.
   */
  open(
    transport: ServerTransport,
    context: C,
    remoteAddress: string | undefined,
    /** `userOf(context)`, worked out once by the caller (holdUser). */
    user: string | undefined,
    config: PeerConfig<Session<C>>,
    /**
     * Accepted without credentials (`identity.inBand`): kept and limited like any session, but
     * `connected$` and the user's index wait for `authenticated`.
     */
    pending = false,
  ): Session<C> {
    const { ratePerSecond, rateBurst } = this.deps.limits;
    const limit =
      ratePerSecond > 0 ? (this.rateLimit ??= new RateLimit(ratePerSecond, rateBurst)) : undefined;
    const session = this.create(transport, context, remoteAddress, limit, config);
    this.live.set(session.id, session);
    this.deps.watch?.(session.id);
    if (pending) {
      session.setIdentity('pending');
      return session;
    }
    // The caller let the user in (Admission.admitUser) in this same turn.
    this.announce(session, user);
    return session;
  }

  /**
   * An in-band connection authenticated (`user` is `userOf(context)`, held by the caller until
   * this returns): announced as a session opened with its identity, unless its user has
   * limits.maxConnectionsPerUser sessions here already; then false, and nothing is changed.
   */
  authenticated(session: Session<C>, user: string | undefined): boolean {
    const users = this.deps.admission.users;
    if (user !== undefined && users && !users.admits(user)) return false;
    this.announce(session, user);
    return true;
  }

  /** A session has its identity: on `connected$`, in its user's index and count. */
  private announce(session: Session<C>, user: string | undefined): void {
    if (user !== undefined) {
      session.user = user;
      this.deps.admission.users?.opened(user);
      const inbox = this.deps.inbox;
      if (inbox) session.inbox = new SessionInbox(session, inbox.holdMs, inbox.maxHeld);
      let sessions = this.byUser.get(user);
      if (!sessions) this.byUser.set(user, (sessions = new Set()));
      sessions.add(session);
      this.deps.users.userConnected(user);
    }
    this.connectedSubject.next(session);
  }

  /** Closed sessions' peers whose slots are held until the runs they left going settle. */
  readonly #holding = new Set<Peer<Session<C>>>();

  /** How many closed sessions hold their slots for the runs they left going (a metric). */
  get closedHoldingSlots(): number {
    return this.#holding.size;
  }

  /** The peers' close hook (PeerConfig.onClosed) of every session `open` keeps. */
  readonly onClosed = (peer: Peer<Session<C>>, info: CloseInfo): void => {
    const session = peer.session;
    this.live.delete(session.id);
    // Its connection slots (total, its address's, its user's) are held until the handlers it
    // left running have settled: what they hold counts toward the bounds, closed or not, or a
    // client could close and open again to run any number of them.
    const { user, remoteAddress } = session;
    const kind = session.transport.kind;
    this.#holding.add(peer);
    peer.afterRuns(() => {
      this.#holding.delete(peer);
      this.deps.admission.release(kind, remoteAddress);
      if (user !== undefined) this.deps.admission.users?.closed(user);
    });
    this.deps.pubsub.detach(session);
    session.inbox?.close();
    if (session.user !== undefined) {
      const sessions = this.byUser.get(session.user);
      sessions?.delete(session);
      if (sessions?.size === 0) this.byUser.delete(session.user);
      this.deps.users.userDisconnected(session.user);
    }
    session.logger.info({ code: info.code, reason: info.reason || undefined }, 'disconnected');
    // One that never authenticated was never announced on connected$ either.
    if (session.isAuthenticated) this.disconnectedSubject.next(session);
  };

  // Params held to MAX_ENCODED_DEPTH where they entered (gateway.notifySession/notifyUser, or
  // the router for a message from another node): not checked again per session.
  notifySession(id: string, method: string, params: Params | undefined): boolean {
    const session = this.live.get(id);
    if (!session || session.isClosed) return false;
    return session.notifyChecked(method, params);
  }

  notifyUser(user: string, method: string, params: Params | undefined): number {
    const sessions = [...(this.byUser.get(user) ?? [])];
    for (const session of sessions) if (!session.isClosed) session.notifyChecked(method, params);
    return sessions.length;
  }

  /**
   * A message of a user's inbox: every local session of the user that has no `$inbox`
   * subscription gets it plain (or has it held, while it is new: see SessionInbox). Decoded
   * once, and only when some session needs it.
   */
  deliverInbox(user: string, message: BrokerMessage): void {
    const sessions = this.byUser.get(user);
    if (!sessions) return;
    let decoded: InboxMessage | null = null;
    for (const session of [...sessions]) {
      const inbox = session.inbox;
      if (!inbox?.wantsMessages || session.isClosed) continue;
      decoded ??= decodeInboxMessage(message) ?? null;
      if (!decoded) return;
      inbox.offer(decoded);
    }
  }

  /** Shutdown: no more connected/disconnected events. */
  complete(): void {
    this.connectedSubject.complete();
    this.disconnectedSubject.complete();
  }
}
