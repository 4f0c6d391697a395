// Revocation (docs/identity.md, Revocation): closing a user's sessions, or one session, on
// whichever node holds them, and the deny list in the broker that keeps a revoked user out
// while its credentials would still be valid. The deny check wraps the authenticate hook, so
// the upgrade, in-band authentication and refresh all pass it.
import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import {
  DEFAULT_DENY_FOR_MS,
  DenyListFullError,
  MAX_DENY_FOR_MS,
  mergeDenials,
} from '../pubsub/deny-list.js';
import type { Denial } from '../pubsub/deny-list.js';
import { DEFAULT_SESSION_DENY_FOR_MS, closeReasonOf } from '../pubsub/session-deny-list.js';
import type { ExchangeRevocation } from './http-rpc.js';
import type { UpgradeRequest } from './options.js';
import type { Session } from './session.js';
import { brokerUnavailable } from './session-router.js';
import type { Revocation, SessionRouter } from './session-router.js';
import { UpgradeRejection } from './upgrade-rejection.js';

/** The close code of a revoked session (see docs/wire-protocol.md, close codes). */
export const REVOKED_CLOSE_CODE = 4403;

/** The deny list's refusal: HTTP 401 with this body, -32010 with this message in-band. */
export const DENIED_MESSAGE = 'revoked';

/** The close reason when the application gives none. */
const DEFAULT_REASON = 'revoked';

/**
 * Users whose deny-list entries a node reads at once when its broker link is back
 * (Revocations.recheck): one batch of reads in flight, pipelined on the broker connection, per
 * this many users with sessions or exchanges here.
 */
export const DEFAULT_RECHECK_BATCH = 100;

/**
 * Denials this node remembers, so a revoked client retrying in a loop costs no broker read, and
 * revocations it received, so a session admitted meanwhile is refused (revokedSince).
 */
export const MAX_CACHED_DENIALS = 10_000;

/**
 * One user's entry among those a node remembers: the denial as far as known, and when this
 * node last received a revocation of the user (revocationMark's clock; -Infinity: never).
 */
interface SeenDenial extends Denial {
  receivedAt: number;
}

/** The guarded hook's handle on its Revocations (revokedSince). */
const REVOCATIONS = Symbol('revocations');

type Guarded<C> = Authenticate<C> & { [REVOCATIONS]?: Revocations<C> };

/**
 * A reading of the clock revocations are received by (monotonic, this process's), taken by a
 * session about to be authenticated, before the deny check: revokedSince compares with it.
 */
export function revocationMark(): number {
  return performance.now();
}

/**
 * Whether `user` was revoked on this node since `mark` (revocationMark, taken before the
 * session's deny check) with credentials `context` does not let in: the check a session needs
 * after it waited for its user's hold (holdUser) and right before it opens, since a revocation
 * that lands in that wait finds no session of the user to close. False when `authenticate` is
 * not a hook `Revocations.guard` made (no user can be revoked then).
 */
export function revokedSince<C>(
  authenticate: Authenticate<C> | undefined,
  user: string | undefined,
  context: C,
  mark: number,
): boolean {
  if (user === undefined) return false;
  const revocations = (authenticate as Guarded<C> | undefined)?.[REVOCATIONS];
  return revocations?.revokedSince(user, context, mark) ?? false;
}

/**
 * Whether the deny list, as this node last read it, refuses `user` with credentials `context`:
 * the check a session needs when a refresh was refused as revoked, since its own credentials,
 * issued before the refused ones, are then revoked too and its node missed the revocation.
 * False when `authenticate` is not a hook `Revocations.guard` made.
 */
export function deniedNow<C>(
  authenticate: Authenticate<C> | undefined,
  user: string | undefined,
  context: C,
): boolean {
  if (user === undefined) return false;
  const revocations = (authenticate as Guarded<C> | undefined)?.[REVOCATIONS];
  return revocations?.deniedNow(user, context) ?? false;
}

export interface RevokeUserOptions {
  /** Told to the client as the close reason (truncated to 123 bytes). Default `revoked`. */
  reason?: string;
  /**
   * How long the user stays on the deny list, in ms: 1 to 86 400 000 (24 h). Default
   * 3 600 000 (1 h); make it at least the lifetime of the credentials being revoked.
   */
  denyForMs?: number;
}

export interface RevokeSessionOptions {
  /** Told to the client as the close reason (truncated to 123 bytes). Default `revoked`. */
  reason?: string;
  /**
   * How long the broker keeps the revocation of a session on another node, in ms, for that
   * node to read should its broker link be down now: 1 to 86 400 000 (24 h). Default 3 600 000
   * (1 h); a node whose link is back later leaves the session open.
   */
  keepForMs?: number;
}

type Authenticate<C> = (request: UpgradeRequest) => C | Promise<C>;

export interface RevocationDeps<C> {
  broker: Broker;
  router: Pick<SessionRouter, 'revokeUser' | 'revokeSession'>;
  nodeId: string;
  logger: Logger;
  exposeErrorDetails: boolean;
  userOf: ((context: C) => string | undefined) | undefined;
  /** When a session's credentials were issued (ms since the epoch); identity.issuedAtOf. */
  issuedAtOf: ((context: C) => number | undefined) | undefined;
  /** This node's open sessions. */
  sessions(): Iterable<Session<C>>;
  /**
   * End this node's HTTP POST exchanges in progress a revocation names (HttpRpc.revoke); returns
   * how many. Their sessions are not among `sessions()`.
   */
  exchanges?: (target: ExchangeRevocation<C>) => number;
  /** The users with HTTP POST exchanges in progress on this node (HttpRpc.users). */
  exchangeUsers?: () => Iterable<string>;
  /** Deny-list reads in flight at once in a recheck. Default DEFAULT_RECHECK_BATCH. */
  recheckBatch?: number;
}

export { closeReasonOf };

/** Credentials issued after the revocation: the deny list does not apply to them. */
function issuedAfter(issuedAt: number | undefined, revokedAt: number): boolean {
  return typeof issuedAt === 'number' && Number.isFinite(issuedAt) && issuedAt > revokedAt;
}

function readReason(method: string, options: { reason?: unknown }): string {
  const reason = options.reason ?? DEFAULT_REASON;
  if (typeof reason !== 'string') {
    throw new TypeError(`${method}: reason must be a string, got ${typeof reason}`);
  }
  return closeReasonOf(reason);
}

function readForMs(method: string, option: string, given: unknown, byDefault: number): number {
  const value = given ?? byDefault;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < 1 ||
    value > MAX_DENY_FOR_MS
  ) {
    throw new RangeError(
      `${method}: ${option} must be an integer from 1 to ${MAX_DENY_FOR_MS} (24 h), got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  return value;
}

/**
 * `gateway.revokeUser`, `gateway.revokeSession`, the close of this node's revoked sessions
 * (the router's `revoked` hook), and the deny check around the authenticate hook.
 */
export class Revocations<C> {
  /**
   * Denials seen here (made here, read from the broker, or received as a revocation), by user,
   * oldest first. Used only to refuse: an entry in the broker is never older, nor lapses
   * earlier, than one seen here.
   */
  private readonly seen = new Map<string, SeenDenial>();

  constructor(private readonly deps: RevocationDeps<C>) {}

  /**
   * Close every session of `user`, on every node, with 4403 and `reason`, and put the user on
   * the broker's deny list for `denyForMs`: authenticating the user is refused meanwhile, on
   * every node, unless `identity.issuedAtOf` says the credentials were issued after now.
   * Resolves with how many sessions were closed on this node.
   */
  async revokeUser(user: string, options: RevokeUserOptions = {}): Promise<number> {
    if (typeof user !== 'string' || user === '') {
      throw new TypeError('revokeUser: user must be a non-empty string');
    }
    const reason = readReason('revokeUser', options);
    const denyForMs = readForMs('revokeUser', 'denyForMs', options.denyForMs, DEFAULT_DENY_FOR_MS);
    const { broker, router, nodeId } = this.deps;
    if (!broker.deny || !broker.denied) {
      throw new TypeError(
        'revokeUser needs a broker with a deny list (Broker.deny and Broker.denied): this one has none',
      );
    }
    const revocation: Revocation & { user: string } = {
      user,
      reason,
      revokedAt: Date.now(),
      origin: nodeId,
    };
    try {
      // Listed first, so that a closed client that reconnects at once, anywhere, is refused.
      await Promise.resolve().then(() => broker.deny!(user, revocation.revokedAt, denyForMs));
    } catch (err) {
      // The sessions here close regardless; the caller is told the revocation is not complete.
      this.closeLocal(revocation);
      if (err instanceof DenyListFullError) throw err;
      throw brokerUnavailable(
        this.deps.logger,
        this.deps.exposeErrorDetails,
        err,
        'the user was not revoked',
        { user },
      );
    }
    this.remember(user, { revokedAt: revocation.revokedAt, until: Date.now() + denyForMs });
    this.deps.logger.info({ user, reason, denyForMs }, 'user revoked');
    return router.revokeUser(revocation);
  }

  /**
   * Close one session, on whichever node holds it, with 4403 and `reason`. The user is not
   * listed: the same credentials may connect again (revokeUser keeps a user out). A session on
   * another node is recorded in the broker for `keepForMs` first (Broker.denySession), so that
   * node closes it when its link is back should the message not reach it (recheck). Resolves
   * false when the session is not here and its id names no other node.
   */
  async revokeSession(sessionId: string, options: RevokeSessionOptions = {}): Promise<boolean> {
    if (typeof sessionId !== 'string' || sessionId === '') {
      throw new TypeError('revokeSession: sessionId must be a non-empty string');
    }
    const reason = readReason('revokeSession', options);
    const keepForMs = readForMs(
      'revokeSession',
      'keepForMs',
      options.keepForMs,
      DEFAULT_SESSION_DENY_FOR_MS,
    );
    const revocation = {
      session: sessionId,
      reason,
      revokedAt: Date.now(),
      origin: this.deps.nodeId,
    };
    return this.deps.router.revokeSession(revocation, keepForMs);
  }

  /**
   * Close this node's sessions a revocation names (SessionRouterOptions.revoked): the session,
   * or the user's sessions but those whose credentials were issued after the revocation; its
   * HTTP POST exchanges in progress likewise (answered 403 with the reason). Returns how many it
   * closed and ended.
   */
  readonly closeLocal = (revocation: Revocation): number => this.closeNamed([revocation]);

  /**
   * Read again what revocations sent while the broker's link was down said, and close what
   * they name as a received revocation closes it (closeLocal). Run when the link is back
   * (SessionRouterOptions.relinked): those messages never arrive. Reads this node's revoked
   * sessions (recheckSessions) and the deny list (recheckUsers) side by side. Resolves false
   * when something could not be read (what it names stays open until a later run reads it).
   */
  readonly recheck = async (): Promise<boolean> => {
    const [users, sessions] = await Promise.all([this.recheckUsers(), this.recheckSessions()]);
    return users && sessions;
  };

  /**
   * Read this node's revoked sessions in the broker (Broker.deniedSessions, one read) and close
   * those still here with 4403 and each record's reason (403 for an HTTP POST exchange). True
   * without such records in the broker; false when the read failed.
   */
  private async recheckSessions(): Promise<boolean> {
    const { broker, logger, nodeId } = this.deps;
    if (!broker.deniedSessions) return true;
    let records;
    try {
      records = await Promise.resolve().then(() => broker.deniedSessions!(nodeId));
    } catch (err) {
      logger.warn({ err }, 'revoked sessions unread after a broker outage');
      return false;
    }
    const closed = this.closeNamed(
      records.map(({ session, revokedAt, reason }) => ({
        session,
        reason,
        revokedAt,
        origin: nodeId,
      })),
    );
    if (closed > 0) {
      logger.info(
        { recorded: records.length, closed },
        'revoked sessions read again after a broker outage',
      );
    }
    return true;
  }

  /**
   * Read the deny list again for every user with a session or an HTTP POST exchange in progress
   * on this node, and close those listed (closeLocal, with the listing's revocation time and the
   * reason `revoked`: the list keeps no reason). Reads go `recheckBatch` users at a time. False
   * when some entry could not be read (those users' sessions stay open until a later run).
   */
  private async recheckUsers(): Promise<boolean> {
    const { broker, logger, nodeId } = this.deps;
    if (!broker.denied) return true;
    const users = new Set<string>();
    for (const session of this.deps.sessions()) {
      if (!session.isClosed && session.user !== undefined) users.add(session.user);
    }
    for (const user of this.deps.exchangeUsers?.() ?? []) users.add(user);
    const batch = Math.max(1, Math.floor(this.deps.recheckBatch ?? DEFAULT_RECHECK_BATCH));
    const listed = [...users];
    let unread = 0;
    let closed = 0;
    for (let start = 0; start < listed.length; start += batch) {
      const part = listed.slice(start, start + batch);
      const reads = await Promise.allSettled(
        part.map((user) => Promise.resolve().then(() => broker.denied!(user))),
      );
      const revocations: (Revocation & { user: string })[] = [];
      reads.forEach((read, index) => {
        const user = part[index]!;
        if (read.status === 'rejected') {
          unread++;
          return;
        }
        if (!read.value) return;
        this.remember(user, read.value);
        revocations.push({
          user,
          reason: DEFAULT_REASON,
          revokedAt: read.value.revokedAt,
          origin: nodeId,
        });
      });
      closed += this.closeNamed(revocations);
      // Down again: the rest would fail alike, and its return runs this again.
      if (unread > 0 && !broker.ready) {
        unread += listed.length - start - part.length;
        break;
      }
    }
    if (closed > 0 || unread > 0) {
      logger.info(
        { users: listed.length, closed, unread },
        'deny list read again after a broker outage',
      );
    }
    return unread === 0;
  }

  /**
   * Close the sessions and end the exchanges the revocations name, in one pass over this
   * node's sessions (see closeLocal).
   */
  private closeNamed(revocations: readonly Revocation[]): number {
    if (revocations.length === 0) return 0;
    const bySession = new Map<string, { revocation: Revocation; reason: string }>();
    const byUser = new Map<string, { revocation: Revocation; reason: string }>();
    for (const revocation of revocations) {
      const { session: id, user, revokedAt } = revocation;
      const reason = closeReasonOf(
        typeof revocation.reason === 'string' ? revocation.reason : DEFAULT_REASON,
      );
      // Remembered for the sessions of the user still being admitted, which are not among those
      // below: each looks here (revokedSince) once it is about to open. The message does not say
      // how long the user is listed, so it adds no listing the deny check would refuse by.
      if (typeof user === 'string' && Number.isFinite(revokedAt)) {
        this.remember(user, { revokedAt, until: 0 }, revocationMark());
      }
      if (typeof id === 'string') bySession.set(id, { revocation, reason });
      else if (typeof user === 'string') byUser.set(user, { revocation, reason });
    }
    let closed = 0;
    for (const session of this.deps.sessions()) {
      if (session.isClosed) continue;
      const named =
        bySession.get(session.id) ??
        (session.user === undefined ? undefined : byUser.get(session.user));
      if (!named) continue;
      const { revocation, reason } = named;
      if (revocation.session === undefined) {
        if (this.issuedAfter(session.context, revocation.revokedAt)) continue;
      }
      session.logger.info({ reason }, 'session revoked');
      session.close(REVOKED_CLOSE_CODE, reason);
      closed++;
    }
    for (const { revocation, reason } of [...bySession.values(), ...byUser.values()]) {
      closed +=
        this.deps.exchanges?.({
          session: revocation.session,
          user: revocation.user,
          reason,
          spare: (context) => this.issuedAfter(context, revocation.revokedAt),
        }) ?? 0;
    }
    return closed;
  }

  /**
   * The authenticate hook with the deny check after it: a listed user is refused (401
   * `revoked`) unless its credentials were issued after the revocation; a broker that cannot
   * answer refuses too (503: fail closed). The hook itself unchanged without `userOf` (no user,
   * nothing to deny) or with a broker that keeps no deny list. The hook made here carries this
   * Revocations, for the check once more before a session opens (revokedSince).
   */
  guard(hook: Authenticate<C> | undefined): Authenticate<C> | undefined {
    const { broker, userOf, logger } = this.deps;
    if (!hook || !userOf || !broker.denied) return hook;
    const guarded: Guarded<C> = async (request) => {
      const context = await hook(request);
      let user: string | undefined;
      try {
        user = userOf(context);
      } catch {
        // The session's own userOf step reports it and refuses the connection (500).
        return context;
      }
      if (user === undefined) return context;
      const seen = this.seen.get(user);
      if (seen && seen.until > Date.now() && !this.issuedAfter(context, seen.revokedAt)) {
        throw revoked();
      }
      let denial: Denial | undefined;
      try {
        denial = await broker.denied!(user);
      } catch (err) {
        logger.warn({ err, user }, 'deny list unavailable: authentication refused');
        throw new UpgradeRejection(503, 'Revocation check unavailable', { 'Retry-After': '1' });
      }
      if (!denial) return context;
      // A revocation newer than any this node knew of: its message did not reach this node
      // (lost with the link up, or sent before it listened), so the user's sessions here that
      // it names are still open. They close as the message would have closed them, once this
      // turn's refusal has gone out (a refresh refused here is answered before its session
      // closes, as identity's closeAfterReply does).
      const missed = (this.seen.get(user)?.revokedAt ?? -Infinity) < denial.revokedAt;
      this.remember(user, denial);
      if (missed) {
        const revocation = {
          user,
          reason: DEFAULT_REASON,
          revokedAt: denial.revokedAt,
          origin: this.deps.nodeId,
        };
        setImmediate(() => {
          const closed = this.closeNamed([revocation]);
          if (closed > 0) logger.info({ user, closed }, 'revocation read from the deny list');
        });
      }
      if (this.issuedAfter(context, denial.revokedAt)) return context;
      throw revoked();
    };
    guarded[REVOCATIONS] = this;
    return guarded;
  }

  /** See the function deniedNow. */
  deniedNow(user: string, context: C): boolean {
    const seen = this.seen.get(user);
    return !!seen && seen.until > Date.now() && !this.issuedAfter(context, seen.revokedAt);
  }

  /** See the function revokedSince. */
  revokedSince(user: string, context: C, mark: number): boolean {
    const seen = this.seen.get(user);
    return !!seen && seen.receivedAt >= mark && !this.issuedAfter(context, seen.revokedAt);
  }

  /**
   * Whether `context`'s credentials were issued after `revokedAt`. An issuedAtOf that throws
   * cannot show they were: the revocation applies (fail closed), and one session's failing hook
   * does not stop the rest of the user's sessions and exchanges from being ended.
   */
  private issuedAfter(context: C, revokedAt: number): boolean {
    let issuedAt: number | undefined;
    try {
      issuedAt = this.deps.issuedAtOf?.(context);
    } catch (err) {
      this.deps.logger.error({ err }, 'identity.issuedAtOf failed: taken as issued before');
      return false;
    }
    return issuedAfter(issuedAt, revokedAt);
  }

  /**
   * Keep `denial` as the user's newest entry, merged with what is known (the newer revocation,
   * the later end, the latest receipt), within MAX_CACHED_DENIALS: the oldest entry goes first.
   */
  private remember(user: string, denial: Denial, receivedAt = -Infinity): void {
    const current = this.seen.get(user);
    this.seen.delete(user);
    if (this.seen.size >= MAX_CACHED_DENIALS) {
      const oldest = this.seen.keys().next();
      if (!oldest.done) this.seen.delete(oldest.value);
    }
    this.seen.set(user, {
      ...mergeDenials(current, denial),
      receivedAt: Math.max(current?.receivedAt ?? -Infinity, receivedAt),
    });
  }
}

function revoked(): UpgradeRejection {
  return new UpgradeRejection(401, DENIED_MESSAGE);
}
