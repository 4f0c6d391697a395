import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnsweringPeer } from '../peer/answering-peer.js';
import type { Logger } from '../peer/logger.js';
import { isTraceparent } from '../protocol/traceparent.js';
import { CloseCode } from '../transport/transport.js';
import type { ServerTransport } from '../transport/transport.js';
import type { Admission } from './admission.js';
import type { GatewayLimits, UpgradeRequest } from './options.js';
import type { Session } from './session.js';
import type { TokenBucket } from './token-bucket.js';
import { AddressBuckets } from './address-buckets.js';
import { releaseAdmission, runAuthenticate } from './run-authenticate.js';
import { describeUpgrade } from './upgrade-request.js';
import type { TrustedProxies } from './client-address.js';
import { INVALID_UTF8_REPLY, strictUtf8 } from '../protocol/invalid-utf8.js';
import { readBodyBytes, refuseUnread } from './read-body.js';
import type { BodyReadings } from './body-readings.js';
import { codingRefusal } from './body-codings.js';
import { HttpExchangeTransport } from './http-exchange-transport.js';
import { writeReply } from './http-reply.js';
import { closeRefused, grantOrigin } from './http-routes.js';
import { sendableRefusal } from './upgrade-rejection.js';
import { REVOKED_CLOSE_CODE, revocationMark, revokedSince } from './revocation.js';

/** Media types a JSON-RPC POST may carry (the JSON-RPC over HTTP description lists all three). */
const JSON_TYPES = new Set(['application/json', 'application/json-rpc', 'application/jsonrequest']);

/** Resolves once the session's peer has no call or notification handler running (or it closed). */
function untilIdle(session: {
  readonly peer: { whenIdle(done: () => void): void };
}): Promise<void> {
  return new Promise((resolve) => session.peer.whenIdle(resolve));
}

/**
 * Exchanges closed with runs left going (their caller gone, a revocation, the shutdown), by
 * request: the runs' settling, which their admission slot and user count wait for (see run).
 */
const outlivingRuns = new WeakMap<UpgradeRequest, Promise<void>>();

/** `release` now, or once the runs `upgrade`'s exchange left going have settled. */
function afterOutliving(upgrade: UpgradeRequest, release: () => void): void {
  const runs = outlivingRuns.get(upgrade);
  if (runs) void runs.then(release);
  else release();
}

export interface HttpRpcDeps<C> {
  admission: Admission;
  authenticate: ((request: UpgradeRequest) => C | Promise<C>) | undefined;
  /**
   * The user of a context (GatewayOptions.userOf), read once an exchange has authenticated: its
   * session's `user`, and what limits.maxConnectionsPerUser counts it under.
   */
  userOf?: ((context: C) => string | undefined) | undefined;
  /**
   * Told of an exchange refused by a gate an upgrade also has, with the upgrade's reason
   * (`draining`, admission's `origin`, `capacity`, `ip-limit`, `ip-rate`, authentication's
   * `unauthenticated`, `auth-error`, `auth-timeout`, and `user-limit`): counted and logged as an
   * upgrade's refusal is.
   */
  refused?: (reason: string, status: number, remoteAddress: string | undefined) => void;
  limits: Required<GatewayLimits>;
  logger: Logger;
  /** Proxies whose X-Forwarded-For names the client (rate buckets and limits are per client). */
  proxies?: TrustedProxies | undefined;
  isClosing: () => boolean;
  /** Told of a POST whose body did not arrive within `bodyTimeoutMs` (answered 408 and closed). */
  bodyTimedOut?: (remoteAddress: string | undefined) => void;
  /** limits.bytesPerSecondPerIp for HTTP bodies, shared with the event streams' POSTs. */
  postBytes?: AddressBuckets | undefined;
  /** The bodies being read, counted toward limits.maxBufferedBytesTotal; undefined: not counted. */
  bodyReadings?: BodyReadings | undefined;
  newSession(
    context: C,
    remoteAddress: string | undefined,
    transport: ServerTransport,
    admit: { take(): boolean } | undefined,
    /** `userOf(context)`: the session's `user`. */
    user: string | undefined,
  ): Session<C>;
  /**
   * An exchange's session is done (answered, its handlers idle, or its caller gone): release
   * what it may hold elsewhere (a `history` call's read slots). Its peer never closes, so the
   * close hook that does this for connections does not run.
   */
  ended(session: Session<C>): void;
}

/**
 * A revocation's target among the exchanges in progress: one exchange by its session's id, or
 * every exchange of a user but those `spare` keeps (credentials issued after the revocation).
 */
export interface ExchangeRevocation<C> {
  session?: string | undefined;
  user?: string | undefined;
  reason: string;
  spare?: ((context: C) => boolean) | undefined;
}

/** One exchange in progress: its session, and how a revocation or the shutdown ends it. */
interface Exchange<C> {
  readonly session: Session<C>;
  readonly revoke: (reason: string) => void;
  readonly shutDown: () => void;
}

function send(
  res: ServerResponse,
  status: number,
  body?: string,
  headers: Readonly<Record<string, string>> = {},
  type = 'text/plain; charset=utf-8',
): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    ...(body === undefined
      ? {}
      : { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) }),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(body);
}

/**
 * A reply under way (chunked, its headers out) when its exchange is revoked or cut by the
 * shutdown: none of the rest is made (`ended`), and the response is cut, so that the caller has
 * none of its results (a chunked response cut before its last chunk is an error to every HTTP
 * client; one queued behind another on a pipelined connection is cut once it has its socket).
 */
function cutReply(res: ServerResponse, ended: AbortController): void {
  ended.abort();
  if (res.headersSent && !res.writableEnded) res.destroy();
}

/**
 * A refusal sent before the body was read: the connection closes after it, so a body that
 * trickles in holds nothing open (bodyTimeoutMs only runs while a body is read), and a client
 * refused goes on with nothing it was refused on, body or not.
 */
function refuse(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  closeRefused(res);
  send(res, status, body, headers);
}

/**
 * JSON-RPC over HTTP POST on the gateway's path: the same methods, authenticate hook,
 * authorization, limits and call metrics as the WebSocket. A JSON-RPC response (errors
 * included) is 200 with the response as body; a notification or a batch of them is 204.
 * Other statuses mean the request never reached JSON-RPC (see docs/transports.md, "HTTP POST").
 */
export class HttpRpc<C> {
  /** limits.ratePerSecond per address: each HTTP request is a new session, so it outlives them. */
  private readonly buckets: AddressBuckets | undefined;

  constructor(private readonly deps: HttpRpcDeps<C>) {
    const { ratePerSecond, rateBurst } = deps.limits;
    this.buckets = ratePerSecond > 0 ? new AddressBuckets(ratePerSecond, rateBurst) : undefined;
  }

  /** Requests being handled now; a drain waits for them. */
  private inFlight = 0;
  /** Exchanges closed with runs left going, still counted in the connection limits (holdWhileRunning). */
  private closedHolding = 0;

  /** Exchanges closed with runs left going that still hold their slots (a gauge). */
  get closedHoldingSlots(): number {
    return this.closedHolding;
  }
  /**
   * The exchanges in progress by their session's id, so a shutdown can end them and
   * revokeSession find one.
   */
  private readonly exchanges = new Map<string, Exchange<C>>();
  /** The same exchanges by user (those with one), for revokeUser; a user's entry while it has one. */
  private readonly byUser = new Map<string, Set<Exchange<C>>>();

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.inFlight++;
    try {
      await this.exchange(req, res);
    } finally {
      this.inFlight--;
    }
  }

  /** Resolve once no request is being handled, or after `timeoutMs`. */
  async settled(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    // Polling is enough: it runs once per shutdown, for at most the deadline.
    while (this.inFlight > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  private async exchange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { deps } = this;
    const upgrade = describeUpgrade(req, 'http', deps.proxies);
    // Before any refusal: a page on an allowed origin reads its status and Retry-After, where
    // CORS would show it a failed request.
    this.allowOrigin(req, res);
    if (deps.isClosing()) {
      deps.refused?.('draining', 503, upgrade.remoteAddress);
      return refuse(res, 503, 'Server shutting down\n', { 'retry-after': '1' });
    }
    const contentType = req.headers['content-type'] ?? '';
    const type = contentType.split(';', 1)[0]!.trim().toLowerCase();
    if (!JSON_TYPES.has(type)) {
      return refuse(res, 415, 'POST a JSON-RPC request with Content-Type: application/json\n');
    }
    const misread = codingRefusal(req, contentType);
    if (misread) return refuse(res, misread.status, `${misread.message}\n`, misread.headers);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > deps.limits.maxMessageBytes) return this.tooLarge(req, res);

    const admitted = deps.admission.admit(upgrade);
    if (typeof admitted !== 'function') {
      deps.refused?.(admitted.reason, admitted.status, upgrade.remoteAddress);
      return refuse(res, admitted.status, `${admitted.message}\n`, admitted.headers);
    }
    try {
      await this.answer(req, res, upgrade);
    } finally {
      // Held until the work is done, not until the response is: a notification's handler runs
      // on after its 204, and counts against the limits until it ends (an authenticate hook
      // given up on, until it settles: releaseAdmission; runs a close left going, until they
      // settle: run).
      afterOutliving(upgrade, () =>
        releaseAdmission(upgrade, deps.limits.authenticateTimeoutMs, admitted),
      );
    }
  }

  private async answer(
    req: IncomingMessage,
    res: ServerResponse,
    upgrade: UpgradeRequest,
  ): Promise<void> {
    const { deps } = this;
    // Taken before the deny check: a revocation received from here until the exchange is in
    // progress finds nothing to end, and is caught by revokedSince (run).
    const mark = revocationMark();
    const auth = await runAuthenticate(
      deps.authenticate,
      upgrade,
      deps.logger,
      deps.limits.authenticateTimeoutMs,
    );
    if (!auth.ok) {
      deps.refused?.(auth.reason, auth.status, upgrade.remoteAddress);
      // Checked as an upgrade's refusal is: one that may not be sent is a plain 500, logged.
      const { status, message, headers } = sendableRefusal(
        { status: auth.status, message: auth.message, headers: auth.headers ?? {} },
        deps.logger,
      );
      return refuse(res, status, `${message ?? 'Internal server error'}\n`, headers);
    }
    const context = auth.context;
    let user: string | undefined;
    try {
      user = deps.userOf?.(context);
    } catch (err) {
      // A failing hook refuses the exchange (500), as it refuses an upgrade.
      deps.logger.error({ err }, 'userOf failed');
      deps.refused?.('auth-error', 500, upgrade.remoteAddress);
      return refuse(res, 500, 'Internal server error\n');
    }
    // The user's count is checked and taken in this turn (nothing awaited in between), and held
    // until the exchange ends: an exchange is a session of its user while it runs.
    const tooMany = deps.admission.admitUser(user);
    if (tooMany) {
      deps.refused?.(tooMany.reason, tooMany.status, upgrade.remoteAddress);
      return refuse(res, tooMany.status, `${tooMany.message}\n`, tooMany.headers);
    }
    if (user === undefined) return this.run(req, res, upgrade, context, undefined, mark);
    deps.admission.users.opened(user);
    try {
      await this.run(req, res, upgrade, context, user, mark);
    } finally {
      afterOutliving(upgrade, () => deps.admission.users.closed(user));
    }
  }

  /** An admitted, authenticated exchange: its body read, answered, and its handlers idle. */
  private async run(
    req: IncomingMessage,
    res: ServerResponse,
    upgrade: UpgradeRequest,
    context: C,
    user: string | undefined,
    /** revocationMark() before the exchange's deny check. */
    mark: number,
  ): Promise<void> {
    const { deps } = this;
    // Undefined when there is none to answer: the client left (also while `authenticate` ran),
    // or a 413 or 408 has been sent.
    const reading = deps.bodyReadings?.start(upgrade.remoteAddress);
    let bytes: Buffer | undefined;
    try {
      bytes = await readBodyBytes(req, res, {
        maxBytes: deps.limits.maxMessageBytes,
        timeoutMs: deps.limits.bodyTimeoutMs,
        timedOut: () => deps.bodyTimedOut?.(upgrade.remoteAddress),
        received: reading && ((read) => reading.read(read)),
        signal: reading?.stopped,
      });
    } finally {
      if (reading) deps.bodyReadings!.end(reading);
    }
    if (reading?.stopped.aborted) {
      // The node's bodies and queues together over limits.maxBufferedBytesTotal, this one among
      // the largest: try again later, as a connection closed for it is told (1013).
      deps.refused?.('over-budget', 503, upgrade.remoteAddress);
      return refuseUnread(req, res, 503, 'Server over its memory budget: try again later.\n', {
        'retry-after': '1',
      });
    }
    if (bytes === undefined) return;
    // The parsing an address's bodies ask of the event loop is bounded as its WebSocket
    // messages' is: a body its bytes (at least messageCostBytes), refused 429 before parsing
    // when the address's byte bucket does not hold it (a POST cannot be paused, as a socket is).
    const byteBucket = deps.postBytes?.of(upgrade.remoteAddress);
    if (byteBucket) {
      const cost = Math.max(bytes.length, deps.limits.messageCostBytes);
      if (byteBucket.available() < cost) {
        deps.refused?.('ip-bytes', 429, upgrade.remoteAddress);
        return send(res, 429, 'Too many bytes from this address: try again later\n', {
          'retry-after': String(byteBucket.retryAfterSeconds(cost)),
        });
      }
      byteBucket.spend(cost);
    }
    // The user revoked on this node since its deny check: refused as the check would refuse it.
    // Nothing is awaited from here until the exchange is in `exchanges`.
    if (revokedSince(deps.authenticate, user, context, mark)) {
      deps.refused?.('unauthenticated', 401, upgrade.remoteAddress);
      return send(res, 401, 'revoked\n');
    }
    const body = strictUtf8(bytes);
    if (body === undefined) {
      // Answered as a syntax error is, token taken and all; there is no message for a session.
      this.bucketFor(upgrade.remoteAddress)?.take();
      return send(res, 200, INVALID_UTF8_REPLY, {}, 'application/json; charset=utf-8');
    }
    const session = deps.newSession(
      context,
      upgrade.remoteAddress,
      new HttpExchangeTransport(byteBucket, deps.limits.messageCostBytes),
      this.bucketFor(upgrade.remoteAddress),
      user,
    );
    // Aborted when the exchange is revoked or cut by the shutdown: its reply is made no more.
    const ended = new AbortController();
    const exchange: Exchange<C> = {
      session,
      // Its handlers are aborted and their results dropped; the caller is answered at once.
      revoke: (reason) => {
        session.close(REVOKED_CLOSE_CODE, reason);
        send(res, 403, `${reason}\n`);
        cutReply(res, ended);
      },
      // A call cut by the shutdown was not answered: 503, as a POST arriving while it drains,
      // never the 204 of a notification accepted.
      shutDown: () => {
        send(res, 503, 'Server shutting down\n', { 'retry-after': '1' });
        cutReply(res, ended);
        session.close(CloseCode.GoingAway, 'server closed');
      },
    };
    this.track(exchange, user);
    // A caller gone before its answer: stop the work done for it (handlers see ctx.signal).
    const abandon = (): void => {
      if (!res.writableFinished) session.close(CloseCode.GoingAway, 'client went away');
    };
    res.once('close', abandon);
    try {
      // newSession makes an AnsweringPeer for a transport that cannot push.
      const traceparent = isTraceparent(req.headers.traceparent)
        ? req.headers.traceparent
        : undefined;
      // Only with a valid traceparent: the spec drops a tracestate whose traceparent it drops.
      // Checked with the requests' own (IncomingDispatch): an invalid one is dropped there.
      const tracestate = traceparent && req.headers.tracestate;
      const reply = await (session.peer as AnsweringPeer<Session<C>>).answer(
        body,
        traceparent,
        tracestate,
      );
      if (reply === undefined) send(res, 204);
      else {
        // Counted on the node until its client has taken it (limits.maxBufferedBytesTotal).
        await writeReply(
          res,
          reply,
          () => deps.bodyReadings?.replied(res, upgrade.remoteAddress),
          ended.signal,
        );
      }
      await untilIdle(session);
    } finally {
      res.off('close', abandon);
      this.untrack(exchange, user);
      deps.ended(session);
      if (session.isClosed) this.holdWhileRunning(upgrade, session);
    }
  }

  /**
   * A closed exchange's runs still going (handlers that do not heed ctx.signal, authorize hooks
   * deciding) keep what they hold counted as this address's and this user's until they settle,
   * as a closed connection's do: else a caller could leave and POST again to have the node run,
   * and hold the params of, any number of them. Not awaited by the exchange: a drain waits for
   * exchanges, not for what their close left behind.
   */
  private holdWhileRunning(upgrade: UpgradeRequest, session: Session<C>): void {
    this.closedHolding++;
    const settled = new Promise<void>((resolve) =>
      session.peer.afterRuns(() => {
        this.closedHolding--;
        resolve();
      }),
    );
    outlivingRuns.set(upgrade, settled);
  }

  /** End every exchange still running (their handlers are aborted): the last step of a shutdown. */
  closeAll(): void {
    for (const exchange of [...this.exchanges.values()]) exchange.shutDown();
  }

  /**
   * End the exchanges in progress a revocation names (one by its session's id, or a user's):
   * their handlers are aborted (ctx.signal), and a caller not yet answered gets 403 with the
   * reason. Returns how many it ended.
   */
  revoke(target: ExchangeRevocation<C>): number {
    const { session: id, user, reason, spare } = target;
    let found: Iterable<Exchange<C>>;
    if (typeof id === 'string') {
      const one = this.exchanges.get(id);
      found = one ? [one] : [];
    } else if (typeof user === 'string') {
      found = [...(this.byUser.get(user) ?? [])];
    } else return 0;
    let ended = 0;
    for (const exchange of found) {
      const { session } = exchange;
      if (session.isClosed) continue;
      if (id === undefined && spare?.(session.context)) continue;
      session.logger.info({ reason }, 'session revoked');
      exchange.revoke(reason);
      ended++;
    }
    return ended;
  }

  /** The users with exchanges in progress (those with one). */
  users(): IterableIterator<string> {
    return this.byUser.keys();
  }

  private track(exchange: Exchange<C>, user: string | undefined): void {
    this.exchanges.set(exchange.session.id, exchange);
    if (user === undefined) return;
    let ofUser = this.byUser.get(user);
    if (!ofUser) this.byUser.set(user, (ofUser = new Set()));
    ofUser.add(exchange);
  }

  private untrack(exchange: Exchange<C>, user: string | undefined): void {
    this.exchanges.delete(exchange.session.id);
    if (user === undefined) return;
    const ofUser = this.byUser.get(user);
    if (!ofUser?.delete(exchange) || ofUser.size > 0) return;
    this.byUser.delete(user);
  }

  /**
   * OPTIONS on the route. With an Origin, a CORS preflight for browsers on other origins: granted
   * to the origins an upgrade is let in from (on the gateway's `allowedOrigins` list; without
   * one, on the request's host at any port), refused (403) otherwise. Without one it is no
   * preflight (a browser always sends Origin with one) but a plain OPTIONS: 204 with the
   * methods the route takes (`allow`), as RFC 9110 9.3.7 has a server answer it.
   */
  preflight(req: IncomingMessage, res: ServerResponse, allow = 'POST, OPTIONS'): void {
    const origin = req.headers.origin;
    if (origin === undefined) return send(res, 204, undefined, { allow });
    if (!this.deps.admission.grantsCors(origin, req)) {
      return refuse(res, 403, 'Origin not allowed\n');
    }
    this.allowOrigin(req, res);
    send(res, 204, undefined, {
      allow,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers':
        req.headers['access-control-request-headers'] ?? 'content-type, authorization',
      'access-control-max-age': '600',
    });
  }

  /**
   * The CORS headers the event stream's route sends too (grantOrigin), credentials included
   * unless every origin is granted (Admission.grantsCredentials).
   */
  private allowOrigin(req: IncomingMessage, res: ServerResponse): void {
    const origin = req.headers.origin;
    const { admission } = this.deps;
    if (origin === undefined || !admission.grantsCors(origin, req)) return;
    grantOrigin(res, origin, admission.grantsCredentials);
  }

  private tooLarge(req: IncomingMessage, res: ServerResponse): void {
    const limit = this.deps.limits.maxMessageBytes;
    send(res, 413, `Request body larger than ${limit} bytes\n`, { connection: 'close' });
    req.resume();
  }

  private bucketFor(remoteAddress: string | undefined): TokenBucket | undefined {
    return this.buckets?.of(remoteAddress);
  }
}
