// A session's identity over the life of its connection (docs/identity.md): in-band
// authentication of a connection accepted without credentials, refresh (`rpc.authenticate` on a
// live connection, or the server asking with `rpc.token` before expiry), and expiry. Apart from
// the intake, which decides at the upgrade, because all of this happens on an open session.
import type { HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { InvalidParamsError, JsonRpcError } from '../protocol/errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { BudgetLedger } from '../transport/output-budget.js';
import type { AuthenticateOutcome } from './run-authenticate.js';
import { DENIED_MESSAGE, deniedNow, revocationMark, revokedSince } from './revocation.js';
import { settledOrAfter } from '../peer/settled-or-after.js';
import { AUTH_TIMED_OUT, HOOK_HANG_RETRY_FACTOR, runAuthenticate } from './run-authenticate.js';
import type { GatewayConfig } from './gateway-config.js';
import { defaultLimits } from './options.js';
import type { GatewayLimits, GatewayOptions, IdentityOptions, UpgradeRequest } from './options.js';
import type { Session } from './session.js';
import { closeWhenIdle } from './shutdown.js';
import { UpgradeRejection } from './upgrade-rejection.js';

/** Close codes of the identity's life (see docs/wire-protocol.md, close codes). */
export const IdentityCloseCode = {
  /** An in-band connection's third refused `rpc.authenticate`. */
  AuthenticationRefused: 4401,
  /** Revoked: `gateway.revokeUser`, `gateway.revokeSession`. */
  Revoked: 4403,
  /** An in-band connection that did not authenticate within `identity.inBandDeadlineMs`. */
  AuthenticationDeadline: 4408,
  /** The identity expired without a successful refresh. */
  CredentialsExpired: 4419,
  /**
   * An in-band connection authenticated as a user that has `limits.maxConnectionsPerUser`
   * sessions on this node already.
   */
  TooManyUserConnections: 4429,
} as const;

/** Refused `rpc.authenticate` calls an in-band connection gets before it is closed (4401). */
export const MAX_AUTHENTICATE_REFUSALS = 3;
/**
 * Tokens (`rpc.authenticate`, the answer to `rpc.token`) that wait, per session, behind the one
 * being checked: more are answered -32000 at once, so a client cannot line up hook runs.
 */
export const MAX_WAITING_AUTHENTICATIONS = 2;

/** How long an expired session's calls in flight have to finish before the close (4419). */
export const EXPIRY_CLOSE_DEADLINE_MS = 10_000;
/** The longest delay a Node timer takes; longer ones are waited for in steps. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** The result of `rpc.authenticate`. */
export interface AuthenticateResult {
  sessionId: string;
  user?: string;
  /** When the identity stops being valid, in ms since the epoch. */
  expiresAt?: number;
}

/** What a refusal's `data.reason` says (or the hook's own message). */
export type UnauthenticatedReason =
  'invalid' | 'expired' | 'revoked' | 'user-changed' | 'unavailable' | 'authentication required';

export interface IdentityDeps<C> {
  config: Pick<GatewayConfig<C>, 'auth' | 'identity' | 'limits' | 'timing'>;
  /** The authenticate hook as the gateway composed it (the same one the upgrade runs). */
  authenticate: GatewayOptions<C>['authenticate'];
  logger: Logger;
  /**
   * Announce a session that authenticated in-band (SessionTable.authenticated); false, with
   * nothing announced, when its user has limits.maxConnectionsPerUser sessions here already.
   */
  authenticated(session: Session<C>, user: string | undefined): boolean;
  /** Hold a user's messages on this node while its session is announced (see ConnectionIntake.holdUser). */
  holdUser(user: string): Promise<void>;
  releaseUser(user: string): void;
  /** After a refresh: end the subscriptions the new context no longer allows. */
  reauthorize(session: Session<C>): Promise<void>;
  /** The node's output budget (limits.maxBufferedBytesTotal), which output held counts toward. */
  outputBudget(): BudgetLedger | undefined;
}

/**
 * One session's identity state. A session gets one only when something will read it: it is
 * in-band, its identity expires, or an authenticate hook will see its request again (a
 * refresh); otherwise at its first `rpc.authenticate`. A session keeps no more than that, since
 * the upgrade's request (its headers, URL, cookies) would outweigh the rest of the session.
 */
interface IdentityState {
  /**
   * The upgrade's request: in-band and refresh calls of the hook see it with the new token.
   * Undefined when there is no hook to see it.
   */
  readonly request: UpgradeRequest | undefined;
  pending: boolean;
  expired: boolean;
  refusals: number;
  /** Being closed once a refusal's reply is out (4401, 4403): no token is checked any more. */
  closing: boolean;
  /** One check at a time, in order: two tokens sent together are weighed one after the other. */
  queue: Promise<unknown> | undefined;
  /** Tokens in the queue: the one being checked and those waiting behind it. */
  queued: number;
  /**
   * Tokens in the queue that came before the identity expired: each is still checked (a refresh
   * sent in time is not lost to a slow hook or key-set fetch), and the expiry's close waits for
   * them while new calls are refused.
   */
  earlyTokens: number;
  /**
   * Expired while early tokens were being checked: the session's output is held meanwhile, and
   * it is closed (4419) once none of them renewed it, or `authenticateTimeoutMs` after the expiry.
   */
  closeOnceChecked: boolean;
  /**
   * A run of the hook given up on (it did not settle within authenticateTimeoutMs) has not
   * settled yet: the next token is refused without running the hook again, so that a hook that
   * hangs leaves one run per connection behind, not one per token.
   */
  hookHanging: boolean;
  cancelTimers: (() => void)[];
  /** Whether the session's close clears the timers (set up with the first timer). */
  watched: boolean;
}

type CheckOutcome = { ok: true; result: AuthenticateResult } | { ok: false; error: JsonRpcError };

/** What the gate answers a call with. */
interface GateRefusal {
  readonly code: number;
  readonly data: { readonly reason: UnauthenticatedReason };
}

const AUTHENTICATION_REQUIRED: GateRefusal = {
  code: ErrorCode.Unauthenticated,
  data: { reason: 'authentication required' },
};
const EXPIRED: GateRefusal = { code: ErrorCode.Unauthenticated, data: { reason: 'expired' } };

/**
 * The identity of every session of a gateway with `identity` options that need it (in-band
 * authentication, expiry). Sessions without state here (HTTP exchanges) pass its gate untouched.
 */
export class IdentityService<C> {
  private readonly states = new WeakMap<Session<C>, IdentityState>();

  constructor(private readonly deps: IdentityDeps<C>) {}

  /** Whether sessions need state here: otherwise the gateway installs none of this. */
  static needed<C>(config: Pick<GatewayConfig<C>, 'identity'>): boolean {
    return config.identity.inBand || config.identity.expiresAtOf !== undefined;
  }

  /**
   * The peer's gate (PeerOptions.gate): a connection not yet authenticated, or whose identity
   * expired, gets -32010 for everything but `rpc.ping` and `rpc.authenticate`.
   */
  readonly gate = (_method: string, session: Session<C>): GateRefusal | undefined => {
    const state = this.states.get(session);
    if (!state) return undefined;
    if (state.pending) return AUTHENTICATION_REQUIRED;
    return state.expired ? EXPIRED : undefined;
  };

  /**
   * A session has opened: `pending` when accepted without credentials (it must authenticate
   * within the deadline), else with the context the upgrade's hook returned.
   */
  opened(session: Session<C>, request: UpgradeRequest, pending: boolean): void {
    if (pending) {
      const state = this.track(session, request, true);
      const deadlineMs = this.deps.config.identity.inBandDeadlineMs;
      this.arm(
        session,
        state,
        () => {
          if (!state.pending || session.isClosed) return;
          session.logger.info({ deadlineMs }, 'closing a connection that did not authenticate');
          session.close(IdentityCloseCode.AuthenticationDeadline, 'authentication deadline');
        },
        deadlineMs,
      );
      return;
    }
    const expiresAt = this.expiresAtOf(session.context, session.logger);
    session.setIdentity({ context: session.context, expiresAt });
    // Nothing will read a state: no timer to set, no hook to show the request to again.
    if (expiresAt === undefined && !this.deps.authenticate) return;
    this.schedule(session, this.track(session, request, false));
  }

  /** A session's state from now on. */
  private track(
    session: Session<C>,
    request: UpgradeRequest | undefined,
    pending: boolean,
  ): IdentityState {
    const state: IdentityState = {
      request,
      pending,
      expired: false,
      refusals: 0,
      closing: false,
      queue: undefined,
      queued: 0,
      earlyTokens: 0,
      closeOnceChecked: false,
      hookHanging: false,
      cancelTimers: [],
      watched: false,
    };
    this.states.set(session, state);
    return state;
  }

  /** Run `fn` after `delayMs` unless the session closes first (or the state's timers are cleared). */
  private arm(session: Session<C>, state: IdentityState, fn: () => void, delayMs: number): void {
    state.cancelTimers.push(later(fn, delayMs));
    if (state.watched) return;
    state.watched = true;
    void session.closed.then(() => clearTimers(state));
  }

  /** The `rpc.authenticate` handler: in-band authentication or a refresh. */
  readonly authenticateCall = async (
    params: unknown,
    ctx: HandlerContext<Session<C>>,
  ): Promise<AuthenticateResult> => {
    const session = ctx.session;
    // A connection opened without a state has one from its first rpc.authenticate; an HTTP
    // exchange never has one.
    const state =
      this.states.get(session) ??
      (session.transport.canPush ? this.track(session, undefined, false) : undefined);
    if (!state) {
      throw new JsonRpcError(
        ErrorCode.UnsupportedTransport,
        'rpc.authenticate needs a connection: over HTTP POST, send the token in the Authorization header',
      );
    }
    const token = readToken(params);
    const outcome = await this.enqueue(session, state, token);
    if (outcome.ok) return outcome.result;
    throw outcome.error;
  };

  /**
   * Check `token` once the tokens before it are checked; at once -32000 when
   * MAX_WAITING_AUTHENTICATIONS wait already.
   */
  private enqueue(session: Session<C>, state: IdentityState, token: string): Promise<CheckOutcome> {
    if (state.queued > MAX_WAITING_AUTHENTICATIONS) {
      return Promise.resolve({
        ok: false,
        error: new JsonRpcError(
          ErrorCode.ServerBusy,
          'Too many rpc.authenticate calls waiting on this connection',
          { maxWaiting: MAX_WAITING_AUTHENTICATIONS },
        ),
      });
    }
    state.queued++;
    const early = !state.expired;
    if (early) state.earlyTokens++;
    const next = (state.queue ?? Promise.resolve())
      .then(() => this.attempt(session, state, token, early))
      .finally(() => {
        state.queued--;
        if (early && --state.earlyTokens === 0 && state.closeOnceChecked) {
          state.closeOnceChecked = false;
          if (state.expired) this.closeExpired(session);
        }
      });
    state.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * One token's turn: checked, unless the answer is known without the hook (the session closed
   * or closing, the identity expired before the token came: `early` is false); an in-band
   * connection's third refusal closes it (4401).
   */
  private async attempt(
    session: Session<C>,
    state: IdentityState,
    token: string,
    early: boolean,
  ): Promise<CheckOutcome> {
    // Closing: the wait for early tokens is over (renewalDeadline), and they are refused too.
    if (state.expired && (!early || state.closing))
      return refusal('Credentials expired', 'expired', 401);
    if (session.isClosed || state.closing) {
      return refusal('Authentication refused: the connection is closing', 'invalid', 401);
    }
    const outcome = await this.check(session, state, token, early);
    // A refusal that closes the connection already (revoked, too many of the user's) is not counted.
    if (
      !outcome.ok &&
      state.pending &&
      !state.closing &&
      ++state.refusals >= MAX_AUTHENTICATE_REFUSALS
    ) {
      session.logger.info({ refusals: state.refusals }, 'closing: authentication refused');
      this.closeAfterReply(
        session,
        state,
        IdentityCloseCode.AuthenticationRefused,
        'authentication refused',
      );
    }
    return outcome;
  }

  /**
   * Close once this turn's reply (a refusal) has gone out: ctx.afterReply is for successes.
   * Tokens still waiting meanwhile are answered without the hook.
   */
  private closeAfterReply(
    session: Session<C>,
    state: IdentityState,
    code: number,
    reason: string,
  ): void {
    state.closing = true;
    setImmediate(() => session.close(code, reason));
  }

  /** Run the hook with `token` and, when it accepts, make its context the session's. */
  private async check(
    session: Session<C>,
    state: IdentityState,
    token: string,
    early: boolean,
  ): Promise<CheckOutcome> {
    const { config, logger } = this.deps;
    const phase = state.pending ? 'in-band' : 'refresh';
    const mark = revocationMark();
    if (state.hookHanging) return refusalOf(AUTH_TIMED_OUT);
    let run: Promise<unknown> | undefined;
    // No request kept: there is no hook to ask, and the token is accepted as runAuthenticate
    // accepts anything without one.
    const outcome: AuthenticateOutcome<C> = state.request
      ? await runAuthenticate(
          this.deps.authenticate,
          { ...state.request, token, phase },
          logger,
          config.limits.authenticateTimeoutMs,
          (started) => {
            run = started;
          },
        )
      : { ok: true, context: undefined as C };
    if (!outcome.ok && outcome.reason === 'auth-timeout' && run) {
      // Until that run settles, or at the latest HOOK_HANG_RETRY_FACTOR timeouts later (a run
      // that never settles must not keep the connection from ever refreshing again).
      const maxMs = HOOK_HANG_RETRY_FACTOR * config.limits.authenticateTimeoutMs;
      state.hookHanging = true;
      settledOrAfter(run, maxMs, () => (state.hookHanging = false));
      // And the connection's slots, should it close meanwhile: else an address could close and
      // open again to start more runs of a hung provider than it has connections.
      session.peer.holdWhile(run, maxMs);
    }
    if (!outcome.ok) {
      // A refresh the deny list refuses: the session's own credentials, older than the refused
      // ones, are revoked too, and this node missed the revocation (its broker link was down
      // when it went out). The session ends as the revocation would have ended it.
      if (
        !state.pending &&
        outcome.status === 401 &&
        outcome.message === DENIED_MESSAGE &&
        deniedNow(this.deps.authenticate, session.user, session.context)
      ) {
        session.logger.info({ user: session.user }, 'refresh refused as revoked: closing');
        this.closeAfterReply(session, state, IdentityCloseCode.Revoked, 'revoked');
      }
      return refusalOf(outcome);
    }
    const context = outcome.context;
    let user: string | undefined;
    try {
      user = config.auth.userOf?.(context);
    } catch (err) {
      session.logger.error({ err }, 'userOf failed');
      return refusal('Authentication failed', 'unavailable', 500);
    }
    if (!state.pending && user !== session.user) {
      return refusal('The token is for another user than the session', 'user-changed', 401);
    }
    const expiresAt = this.expiresAtOf(context, session.logger);
    if (expiresAt !== undefined && expiresAt <= Date.now()) {
      return refusal(EXPIRED_MESSAGE, 'expired', 401);
    }
    if (session.isClosed || (state.expired && (!early || state.closing))) {
      return refusal('Credentials expired', 'expired', 401);
    }
    if (state.pending) {
      const announced = await this.announce(session, state, context, expiresAt, user, mark);
      if (announced === 'revoked') return refusal('revoked', 'revoked', 401);
      if (announced === 'user-limit') return tooManyUserConnections(config.limits);
      this.schedule(session, state);
    } else {
      // A refresh that came before the expiry renews the identity even when it expired while the
      // token was checked: calls are let in again, and the close the expiry waited with is off.
      state.expired = false;
      session.setIdentity({ context, expiresAt });
      // The new identity's timers at once: the old one's expiry must not end the session while
      // its subscriptions are weighed again. Its deadline for the renewal goes with them.
      this.schedule(session, state);
      session.logger.debug({ expiresAt }, 'identity refreshed');
      // What was held since the expiry goes out once the subscriptions are weighed again under
      // the new identity: the held messages of one it no longer allows are given up, and that
      // subscription's end goes out in their place, in order with the rest. (Without an expiry
      // nothing is held: the old identity allowed what went out until the new one was weighed.)
      try {
        await this.deps.reauthorize(session);
      } finally {
        session.releaseOutput();
      }
    }
    const result: AuthenticateResult = { sessionId: session.id };
    if (user !== undefined) result.user = user;
    if (expiresAt !== undefined) result.expiresAt = expiresAt;
    return { ok: true, result };
  }

  /**
   * An in-band connection authenticated: it becomes a session like one authenticated at the
   * upgrade. 'revoked' when the user was revoked since `mark` (taken before the deny check): a
   * revocation landing while the user's hold is awaited finds no session of the user to close,
   * so this one is closed (4403) once its refusal is answered; it stays unauthenticated till then.
   * 'user-limit' when the user has limits.maxConnectionsPerUser sessions here: closed (4429)
   * once its refusal is answered, unauthenticated till then.
   */
  private async announce(
    session: Session<C>,
    state: IdentityState,
    context: C,
    expiresAt: number | undefined,
    user: string | undefined,
    mark: number,
  ): Promise<'announced' | 'revoked' | 'user-limit'> {
    if (user !== undefined) await this.deps.holdUser(user);
    try {
      if (revokedSince(this.deps.authenticate, user, context, mark)) {
        session.logger.info({ user }, 'revoked while authenticating in-band: closing');
        this.closeAfterReply(session, state, IdentityCloseCode.Revoked, 'revoked');
        return 'revoked';
      }
      const before = session.context;
      session.setIdentity({ context, expiresAt });
      // A closed session is not announced (its close has run: it would never leave the count).
      if (!session.isClosed && !this.deps.authenticated(session, user)) {
        // Nothing saw the identity: the table announced nothing. Back to unauthenticated.
        session.setIdentity({ context: before, expiresAt: undefined });
        session.setIdentity('pending');
        const { maxConnectionsPerUser } = this.deps.config.limits;
        session.logger.info({ user, maxConnectionsPerUser }, 'too many connections for the user');
        this.closeAfterReply(
          session,
          state,
          IdentityCloseCode.TooManyUserConnections,
          'too many connections for this user',
        );
        return 'user-limit';
      }
      clearTimers(state);
      state.pending = false;
      if (!session.isClosed) session.logger.info({ user }, 'authenticated in-band');
      return 'announced';
    } finally {
      if (user !== undefined) this.deps.releaseUser(user);
    }
  }

  private expiresAtOf(context: C, logger: Logger): number | undefined {
    return expiryOf(this.deps.config.identity.expiresAtOf, context, logger);
  }

  /**
   * The timers of the identity in force: ask for a fresh token `refreshAheadMs` before it
   * expires, but not before half of what is left has passed (so a run of short tokens does not
   * ask in a loop), and expire it at `expiresAt`.
   */
  private schedule(session: Session<C>, state: IdentityState): void {
    clearTimers(state);
    const expiresAt = session.expiresAt;
    if (expiresAt === undefined || session.isClosed) return;
    const left = expiresAt - Date.now();
    const ask = Math.max(left - this.deps.config.identity.refreshAheadMs, left / 2);
    this.arm(session, state, () => this.askForToken(session, state, expiresAt), ask);
    this.arm(session, state, () => this.expire(session, state), left);
  }

  /** `rpc.token`: the client answers with a fresh token, checked as `rpc.authenticate` checks one. */
  private askForToken(session: Session<C>, state: IdentityState, expiresAt: number): void {
    if (session.isClosed || state.expired || session.expiresAt !== expiresAt) return;
    const timeoutMs = Math.max(1, expiresAt - Date.now());
    session
      .call(ReservedMethod.Token, { expiresAt }, { timeoutMs })
      .then((result) => {
        const token = (result as { token?: unknown } | null | undefined)?.token;
        if (typeof token !== 'string' || token === '') {
          throw new Error('rpc.token was not answered with { token: string }');
        }
        return this.enqueue(session, state, token);
      })
      .then(
        (outcome) => {
          if (!outcome.ok) {
            session.logger.info({ reason: outcome.error.message }, 'refreshed token refused');
          }
        },
        (err: unknown) => session.logger.info({ err }, 'the client did not give a fresh token'),
      );
  }

  /**
   * Expired without a refresh: new calls refused (-32010), those in flight answered, then 4419;
   * nothing else is sent to the client from the expiry on. With tokens sent before now still
   * being checked, the close waits for them, for at most `authenticateTimeoutMs` (the time one
   * check may take), and what the session would send meanwhile is held (Session.holdOutput):
   * one that renews the identity keeps the connection and releases it, in order.
   */
  private expire(session: Session<C>, state: IdentityState): void {
    if (session.isClosed || state.expired) return;
    state.expired = true;
    clearTimers(state);
    if (state.earlyTokens > 0) {
      state.closeOnceChecked = true;
      session.holdOutput(holdBound(this.deps.config.limits), this.deps.outputBudget());
      this.arm(
        session,
        state,
        () => this.renewalDeadline(session, state),
        this.deps.config.limits.authenticateTimeoutMs,
      );
      session.logger.info(
        'credentials expired with a refresh being checked: closing unless it renews them',
      );
      return;
    }
    this.closeExpired(session);
  }

  /**
   * `authenticateTimeoutMs` after the expiry, early tokens still being checked (a slow hook for
   * each of several): no more waiting for them. The one being checked is refused when its check
   * ends, those behind it at their turn, and the session is closed as expired.
   */
  private renewalDeadline(session: Session<C>, state: IdentityState): void {
    if (session.isClosed || !state.expired || !state.closeOnceChecked) return;
    state.closeOnceChecked = false;
    state.closing = true;
    session.logger.info('credentials expired and not renewed in time: closing');
    this.closeExpired(session);
  }

  /**
   * Close an expired session once the calls in flight are answered (4419); nothing but their
   * answers is sent meanwhile, and what was held for a renewal is given up.
   */
  private closeExpired(session: Session<C>): void {
    if (session.isClosed) return;
    session.dropOutput(
      new JsonRpcError(ErrorCode.Unauthenticated, 'Credentials expired', { reason: 'expired' }),
    );
    session.logger.info('credentials expired: closing once the calls in flight are answered');
    void closeWhenIdle(
      session,
      Date.now() + EXPIRY_CLOSE_DEADLINE_MS,
      IdentityCloseCode.CredentialsExpired,
      'credentials expired',
    );
  }
}

/** `identity.expiresAtOf` of `context`; undefined (it does not expire) when the hook throws. */
function expiryOf<C>(
  hook: IdentityOptions<C>['expiresAtOf'],
  context: C,
  logger: Logger,
): number | undefined {
  if (!hook) return undefined;
  try {
    const at = hook(context);
    return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
  } catch (err) {
    logger.error({ err }, 'identity.expiresAtOf failed: the identity does not expire');
    return undefined;
  }
}

/**
 * Characters an expired session may hold while its renewal is checked: the output a connection
 * may leave unread (`maxBufferedBytes`), or its default when that check is off.
 */
function holdBound(limits: Pick<Required<GatewayLimits>, 'maxBufferedBytes'>): number {
  return limits.maxBufferedBytes > 0 ? limits.maxBufferedBytes : defaultLimits.maxBufferedBytes;
}

/** What refuses an identity that has expired by the time the hook accepts it. */
const EXPIRED_MESSAGE = 'The token has expired';

/**
 * The authenticate hook, refusing at the upgrade an identity that has expired by the time the
 * hook accepts it (`identity.expiresAtOf` at or before now), as IdentityService.check refuses one
 * in-band: 401 `The token has expired` on a WebSocket upgrade, an event stream's GET and a POST,
 * a refusal line with status 401 on TCP and stdio. Let through, an upgrade would open a session
 * only for its expiry to close it at once (4419), and a POST, which has no expiry timer, would
 * run its calls. In-band and on refresh the context goes back to `check`, which refuses the same
 * identity -32010 `expired` after its own checks (a refresh for another user is `user-changed`
 * first). The hook itself without `expiresAtOf`.
 */
export function refusingExpired<C>(
  hook: GatewayOptions<C>['authenticate'],
  expiresAtOf: IdentityOptions<C>['expiresAtOf'],
  logger: Logger,
): GatewayOptions<C>['authenticate'] {
  if (!hook || !expiresAtOf) return hook;
  return async (request) => {
    const context = await hook(request);
    if (request.phase !== 'upgrade') return context;
    const expiresAt = expiryOf(expiresAtOf, context, logger);
    if (expiresAt !== undefined && expiresAt <= Date.now()) {
      throw new UpgradeRejection(401, EXPIRED_MESSAGE);
    }
    return context;
  };
}

function readToken(params: unknown): string {
  const token = Array.isArray(params)
    ? (params[0] as unknown)
    : (params as { token?: unknown } | null | undefined)?.token;
  if (typeof token !== 'string' || token === '') {
    throw new InvalidParamsError('rpc.authenticate takes { "token": string } (not empty)');
  }
  return token;
}

/**
 * An in-band `rpc.authenticate` of a user at limits.maxConnectionsPerUser: -32000, as other
 * bounds on what a client holds at once are (maxInFlight, the tokens waiting), not a -32010:
 * the token is good, and the client may try again once a session of the user has closed.
 */
function tooManyUserConnections(limits: Required<GatewayLimits>): CheckOutcome {
  const { maxConnectionsPerUser } = limits;
  return {
    ok: false,
    error: new JsonRpcError(
      ErrorCode.ServerBusy,
      'Too many connections for this user (maxConnectionsPerUser)',
      { maxConnectionsPerUser },
    ),
  };
}

/**
 * A refusal of the gateway's own: `status` is the HTTP status the same refusal has at the
 * upgrade (401 for credentials refused, expired or revoked; 500 for a userOf that throws).
 */
function refusal(message: string, reason: UnauthenticatedReason, status: number): CheckOutcome {
  return {
    ok: false,
    error: new JsonRpcError(ErrorCode.Unauthenticated, message, { reason, status }),
  };
}

/**
 * A refusal of the hook as -32010: its own message, and a reason a client can act on
 * (`unavailable`: try again; `expired`, `revoked`: a new token; `invalid`: anything else).
 */
function refusalOf(outcome: Extract<AuthenticateOutcome<unknown>, { ok: false }>): CheckOutcome {
  const { status, message } = outcome;
  const reason: UnauthenticatedReason =
    status >= 500
      ? 'unavailable'
      : /revoked/i.test(message ?? '')
        ? 'revoked'
        : /expired/i.test(message ?? '')
          ? 'expired'
          : 'invalid';
  const text = message ?? (status >= 500 ? 'Authentication unavailable' : 'Unauthenticated');
  return {
    ok: false,
    error: new JsonRpcError(ErrorCode.Unauthenticated, text, { reason, status }),
  };
}

function clearTimers(state: IdentityState): void {
  for (const cancel of state.cancelTimers) cancel();
  state.cancelTimers = [];
}

/** Run `fn` after `delayMs`, however long (in steps a Node timer takes); returns the cancel. */
function later(fn: () => void, delayMs: number): () => void {
  let timer: ReturnType<typeof setTimeout>;
  const deadline = Date.now() + Math.max(0, delayMs);
  const arm = (): void => {
    const left = deadline - Date.now();
    timer = setTimeout(left > MAX_DELAY_MS ? arm : fn, Math.min(Math.max(0, left), MAX_DELAY_MS));
    timer.unref?.();
  };
  arm();
  return () => clearTimeout(timer);
}
