import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../peer/logger.js';
import { SseTransport } from '../transport/sse-transport.js';
import { CloseCode } from '../transport/transport.js';
import type { SseLimits } from '../transport/sse-transport.js';
import type { ConnectionIntake } from './connection-intake.js';
import { closeRefused, closeUnread, grantOrigin, sendText } from './http-routes.js';
import type { GatewayLimits } from './options.js';
import { INVALID_UTF8_REPLY, strictUtf8 } from '../protocol/invalid-utf8.js';
import { readBodyBytes, refuseUnread } from './read-body.js';
import { codingRefusal } from './body-codings.js';
import { RateLimit, TokenBucket } from './token-bucket.js';
import type { AddressBuckets } from './address-buckets.js';

/** The headers naming an HTTP streaming session on its later requests. */
export const SESSION_HEADER = 'x-wsrpc-session';
export const SECRET_HEADER = 'x-wsrpc-secret';

/** A comment on the event stream this often (proxies time out streams that go quiet). */
const HEARTBEAT_MS = 15_000;
/**
 * On a session's opening GET (or `keepalive=1`): its client will be heard from at least every
 * `keepaliveMs` the session event names (POSTs, resumes, or a POST with this header and no
 * body), and the heartbeat may give the session up when it is not (a client gone without a
 * word, its TCP connection left to time out). On a POST: that keepalive, answered 204.
 */
export const KEEPALIVE_HEADER = 'x-wsrpc-keepalive';

/**
 * How often one session's stream may be resumed: RESUME_BURST at once, then RESUMES_PER_SECOND.
 * A resume replays up to `sseReplayBytes`; without a bound a client could make the server write
 * that as fast as it can ask. A client whose stream drops resumes once per drop; past the rate
 * a resume is refused 429 (Retry-After) and the stream in place, if any, stays. Sessions per
 * address are bounded (maxConnectionsPerIp), so resumes per address are too.
 */
const RESUME_BURST = 10;
const RESUMES_PER_SECOND = 1;

/** The headers the client sends (the session's, Last-Event-ID, a token), granted to a preflight. */
const CLIENT_HEADERS = [
  'authorization',
  'content-type',
  'last-event-id',
  SESSION_HEADER,
  SECRET_HEADER,
  KEEPALIVE_HEADER,
] as const;

/**
 * Which pages on other origins may use the route and read its answers (CORS headers): the
 * origins admission lets open a session, an upgrade too (Admission.grantsCors: the allow-list,
 * or without one the request's host at any port). A page whose session the gateway would open
 * must be able to read its stream, or the browser hides it and the client opens another each
 * time, every one left for sseGraceMs; any other Origin is refused (403).
 */
export interface SseOrigins {
  grantsCors(origin: string, request: IncomingMessage): boolean;
}

export interface SseEndpointDeps<C> {
  intake: Pick<ConnectionIntake<C>, 'acceptEventStream' | 'holdEventStream'>;
  origins: SseOrigins;
  limits: Required<GatewayLimits>;
  /**
   * How often a session whose client asks for it (KEEPALIVE_HEADER on its opening GET) must be
   * heard from: the heartbeat's interval (0: the heartbeat is off, nothing asked).
   */
  keepaliveMs: number;
  logger: Logger;
  counters: { messagesIn: number; messagesOut: number };
  /** Told of a POST body that did not arrive in time (answered 408). */
  bodyTimedOut(remoteAddress: string | undefined): void;
  /**
   * limits.bytesPerSecondPerIp for HTTP bodies, shared with POST /rpc: a session's POST past its
   * address's budget waits for it (its 202 with it), as a WebSocket's socket stops being read.
   */
  postBytes?: AddressBuckets | undefined;
  /**
   * Told of a resume refused, with the reason rpc_rejected_upgrades_total counts it under (see
   * ResumeRefusal).
   */
  resumeRefused(reason: ResumeRefusal, remoteAddress: string | undefined): void;
}

/**
 * Why a resume (a GET naming a session) was refused: `resume-rate` past the session's resume
 * rate (429); `resume-bad-id` a Last-Event-ID that is no integer (400); `resume-expired` the
 * events after it are no longer held (the session closes 1008); `resume-unknown` no such
 * session, a wrong secret or none (404, 400).
 */
export type ResumeRefusal = 'resume-rate' | 'resume-bad-id' | 'resume-expired' | 'resume-unknown';

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A CORS preflight (its origin already granted above, or absent: 403). */
function preflight(req: IncomingMessage, res: ServerResponse, origin: string | undefined): void {
  if (origin === undefined) return sendText(res, 403, 'Origin not allowed\n');
  // The client's own headers, and whatever else the page's requests carry (headers option).
  const asked = (header(req, 'access-control-request-headers') ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  res.writeHead(204, {
    'access-control-allow-methods': 'GET, POST, DELETE',
    'access-control-allow-headers': [...new Set([...CLIENT_HEADERS, ...asked])].join(', '),
    'access-control-max-age': '600',
  });
  res.end();
}

function noSession(res: ServerResponse): void {
  closeRefused(res);
  sendText(res, 404, 'No such session: open a new event stream.\n');
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The HTTP streaming fallback's route (`routes.events`): `GET` opens a session and streams
 * what the server sends it as Server-Sent Events; `GET` with the session's id and secret (the
 * stream's first event tells them) and `Last-Event-ID` (absent: 0) resumes a dropped stream,
 * the one it replaces cut, at most RESUME_BURST at once and RESUMES_PER_SECOND after; `POST` with
 * them carries one JSON-RPC message or batch from the client (answered 202: the replies come
 * on the stream; a body that is not UTF-8 is answered there as a syntax error is, -32700 under
 * id null, with `data.reason` "invalid UTF-8", and takes a rate token as one does); `DELETE`
 * with them ends the session (1000). Id and secret go in the X-Wsrpc-Session and
 * X-Wsrpc-Secret headers, or the `session` and `secret` query parameters (EventSource sets no
 * headers). A refused resume is told to `resumeRefused`, with its reason.
 */
export class SseEndpoint<C> {
  private readonly sessions = new Map<string, SseTransport>();
  /** Each open session's resume budget (RESUME_BURST, RESUMES_PER_SECOND). */
  private readonly resumes = new Map<string, TokenBucket>();
  private readonly resumeRate = new RateLimit(RESUMES_PER_SECOND, RESUME_BURST);
  /** Each open session's client address (after trusted proxies), for its POSTs' byte budget. */
  private readonly addresses = new WeakMap<SseTransport, string | undefined>();
  /** A session's latest POST under way: the next waits for it (see postReceived). */
  private readonly turns = new WeakMap<SseTransport, Promise<void>>();
  /** The session's POST whose body is being read: stopped when the session closes. */
  private readonly reading = new Map<SseTransport, AbortController>();
  private readonly sseLimits: SseLimits;

  constructor(private readonly deps: SseEndpointDeps<C>) {
    const { limits } = deps;
    this.sseLimits = {
      replayBytes: limits.sseReplayBytes,
      replayMs: limits.sseReplayMs,
      graceMs: limits.sseGraceMs,
      maxBufferedBytes: limits.maxBufferedBytes,
      heartbeatMs: HEARTBEAT_MS,
    };
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const id = header(req, SESSION_HEADER) ?? url.searchParams.get('session') ?? undefined;
    const secret = header(req, SECRET_HEADER) ?? url.searchParams.get('secret') ?? undefined;
    const opening = req.method === 'GET' && id === undefined;
    // Only a POST to a session reads its body (within bodyTimeoutMs); answers to any other
    // request with a body, refusals included, close the connection.
    if (req.method !== 'POST' || opening) closeUnread(req, res);
    // Pipelined behind another request on its connection (its response has no socket yet): a
    // stream behind a stream would never be written, and its session would hold a slot for
    // nothing. Refused before any session is made or named.
    if (req.method === 'GET' && !res.socket) {
      return sendText(res, 400, 'An event stream needs its connection to itself.\n');
    }
    const origin = header(req, 'origin');
    if (origin !== undefined && this.deps.origins.grantsCors(origin, req)) {
      // With credentials even under ["*"]: the route stands in for the WebSocket, whose upgrade
      // carries any page's cookies there, and the client's requests all carry them (a CORS
      // answer without Allow-Credentials would fail every one of them, cookies sent or not).
      grantOrigin(res, origin);
    } else if (origin !== undefined && !opening) {
      // The opening GET is refused by admission, as an upgrade is (and counted there), before
      // any session is made, by the rule grantsCors follows: every session it opens is one its
      // page may read. A session's POST, resume and DELETE, and a preflight, are held to it
      // too: the browser sends the user's cookies with them.
      closeRefused(res);
      return sendText(res, 403, 'Origin not allowed\n');
    }
    // A resume that names no session (a proxy dropped its headers, an EventSource reopening a
    // URL without them): a new session would go on as if it were the old one, whose messages
    // after Last-Event-ID would be lost unsaid. Refused: the client learns its stream is lost.
    if (opening && lastEventIdOf(req, url) !== undefined) {
      return sendText(
        res,
        400,
        `A resume names its session: ${SESSION_HEADER} and ${SECRET_HEADER}.\n`,
      );
    }
    if (opening) return this.open(req, res, url);
    if (req.method === 'OPTIONS') return preflight(req, res, origin);
    if (req.method !== 'GET' && req.method !== 'POST' && req.method !== 'DELETE') {
      res.setHeader('allow', 'GET, POST, DELETE, OPTIONS');
      closeRefused(res);
      return sendText(res, 405, 'Use GET for the event stream, POST to send, DELETE to end.\n');
    }
    const resuming = req.method === 'GET';
    const refuseResume = (reason: ResumeRefusal): void => {
      if (resuming) this.deps.resumeRefused(reason, req.socket.remoteAddress);
    };
    if (id === undefined || secret === undefined) {
      refuseResume('resume-unknown');
      closeUnread(req, res);
      return sendText(res, 400, `Name the session: ${SESSION_HEADER} and ${SECRET_HEADER}.\n`);
    }
    const transport = this.sessions.get(id);
    if (!transport || transport.isClosed || !sameSecret(secret, transport.secret)) {
      // The same answer for an unknown id and a wrong secret: ids cannot be probed.
      refuseResume('resume-unknown');
      closeUnread(req, res);
      return noSession(res);
    }
    // Anything that names the session, with its secret, is word from its client.
    transport.heard = true;
    if (req.method === 'POST' && header(req, KEEPALIVE_HEADER) !== undefined) {
      // A keepalive: nothing for the session to read, answered at once.
      closeUnread(req, res);
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      return;
    }
    if (req.method === 'DELETE') {
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      transport.closeByClient();
      return;
    }
    if (resuming) {
      const last = lastEventIdOf(req, url);
      // Digits only: Number() would read "0x1", "1e0", " 1 " and "" (0) as ids too.
      const lastEventId = last !== undefined && /^\d{1,16}$/.test(last) ? Number(last) : undefined;
      if (last !== undefined && (lastEventId === undefined || !Number.isSafeInteger(lastEventId))) {
        refuseResume('resume-bad-id');
        return sendText(res, 400, 'Last-Event-ID must be an event id (an integer).\n');
      }
      // No event has such an id: refused, the session and its stream left as they are (a
      // negative id would close the session as events no longer held, one from the future
      // would leave the events up to it unrecognised by the client when they come).
      if (lastEventId !== undefined && (lastEventId < 0 || lastEventId > transport.lastEventId)) {
        refuseResume('resume-bad-id');
        return sendText(res, 400, 'Last-Event-ID must be the id of an event this session sent.\n');
      }
      const resumes = this.resumes.get(id);
      if (resumes && !resumes.take()) {
        refuseResume('resume-rate');
        const seconds = resumes.retryAfterSeconds();
        res.setHeader('retry-after', String(seconds));
        // Its connection closes too: a client past the rate holds no socket open by resuming.
        res.setHeader('connection', 'close');
        return sendText(res, 429, 'Too many resumes of this session: retry later.\n');
      }
      // Its socket leaves the HTTP socket bounds, as the stream it replaces did (cut by attach).
      this.deps.intake.holdEventStream(res);
      // False: the events after lastEventId are gone, and the session with them (1008).
      if (!transport.attach(res, lastEventId)) refuseResume('resume-expired');
      return;
    }
    // One POST of a session at a time, in the order they came: each waits for the one before.
    const before = this.turns.get(transport);
    let done!: () => void;
    const turn = new Promise<void>((resolve) => (done = resolve));
    this.turns.set(transport, turn);
    try {
      if (before) await before;
      await this.postReceived(req, res, transport);
    } finally {
      done();
      if (this.turns.get(transport) === turn) this.turns.delete(transport);
    }
  }

  /**
   * A session's POST, its turn come: its body read and handed to the session, answered 202. Past
   * the address's byte budget the body is read only once the budget is out of debt: what waits is
   * the request, its body still in its socket (Node stops reading one whose body is not read), as
   * a WebSocket past its budget is not read. Read first, a body would wait in the gateway, and a
   * client writing POSTs faster than the budget (pipelined on one connection, or on many) would
   * make it hold as many as it wrote. The POST that takes the budget into debt is handed over at
   * once; the session's next waits for that debt.
   */
  private async postReceived(
    req: IncomingMessage,
    res: ServerResponse,
    transport: SseTransport,
  ): Promise<void> {
    const { maxMessageBytes, bodyTimeoutMs, messageCostBytes } = this.deps.limits;
    const bucket = this.deps.postBytes?.of(this.addresses.get(transport));
    // Other POSTs of the address (POST /rpc, other sessions) may spend while this one waits.
    for (let wait = bucket?.spend(0) ?? 0; wait > 0; wait = bucket!.spend(0)) {
      await delay(wait);
    }
    // Read once the session's output waits no more (an output turn writes it): what waits is
    // then bounded by its running calls, as a connection whose output waits is not read.
    await transport.outputWritten();
    // The session may have ended meanwhile: its message would go nowhere.
    if (transport.isClosed) {
      closeUnread(req, res);
      return noSession(res);
    }
    // Compressed, or not UTF-8: read as UTF-8 text it would be other text, or a parse error.
    const misread = codingRefusal(req, req.headers['content-type'] ?? '');
    if (misread) {
      return refuseUnread(req, res, misread.status, `${misread.message}\n`, misread.headers);
    }
    // A session closed while its body comes (the node's total over budget, a DELETE, a drain)
    // stops the reading: what was read goes at once, not once the client has sent the rest.
    const stop = new AbortController();
    this.reading.set(transport, stop);
    let bytes: Buffer | undefined;
    try {
      bytes = await readBodyBytes(req, res, {
        maxBytes: maxMessageBytes,
        timeoutMs: bodyTimeoutMs,
        timedOut: () => this.deps.bodyTimedOut(req.socket.remoteAddress),
        received: (read) => transport.bodyReading(read),
        signal: stop.signal,
      });
    } finally {
      this.reading.delete(transport);
      transport.bodyReading(0);
    }
    if (stop.signal.aborted) {
      // Closed to bring the node's total within its budget (1013): try again later, as a
      // WebSocket closed for it is told; otherwise the session is gone.
      if (transport.closeCode === CloseCode.TryAgainLater) {
        refuseUnread(req, res, 503, 'Server over its memory budget: try again later.\n', {
          'retry-after': '1',
        });
      } else refuseUnread(req, res, 404, 'No such session: open a new event stream.\n');
      return;
    }
    if (bytes === undefined) return;
    bucket?.spend(Math.max(bytes.length, messageCostBytes));
    // Or while the body came.
    if (transport.isClosed) return noSession(res);
    res.writeHead(202, { 'cache-control': 'no-store', 'content-length': '0' });
    res.end();
    const body = strictUtf8(bytes);
    // Not text, so not handed to the session; answered on the stream as a syntax error is.
    if (body === undefined) transport.refuse(INVALID_UTF8_REPLY);
    else transport.receive(body);
  }

  private async open(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    let opened: SseTransport | undefined;
    const session = await this.deps.intake.acceptEventStream(req, res, () => {
      const transport = new SseTransport(
        randomBytes(16).toString('base64url'),
        randomBytes(24).toString('base64url'),
        this.sseLimits,
        this.deps.counters,
        (closed) => {
          this.sessions.delete(closed.sessionId);
          this.resumes.delete(closed.sessionId);
          this.reading.get(closed)?.abort();
        },
      );
      this.sessions.set(transport.sessionId, transport);
      this.resumes.set(transport.sessionId, new TokenBucket(this.resumeRate));
      if (
        header(req, KEEPALIVE_HEADER) !== undefined ||
        url.searchParams.get('keepalive') === '1'
      ) {
        transport.keepaliveMs = this.deps.keepaliveMs;
      }
      opened = transport;
      return transport;
    });
    // Set before any I/O since the session opened (this continues its turn): no POST for it
    // can have been read yet.
    if (session && opened) {
      opened.admit = session;
      this.addresses.set(opened, session.remoteAddress);
      const { postBytes, limits } = this.deps;
      if (postBytes) {
        const address = session.remoteAddress;
        opened.charge = (bytes) => postBytes.of(address).spend(bytes);
        opened.messageCostBytes = limits.messageCostBytes;
      }
    }
  }

  /** Shutdown: every session's stream goes (their sessions are closed by the gateway). */
  get size(): number {
    return this.sessions.size;
  }
}

/** Resolves after `ms` (at once for 0); its timer keeps no process alive. */
function delay(ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** The Last-Event-ID a request carries: its header, or (EventSource cannot set one) its query. */
function lastEventIdOf(req: IncomingMessage, url: URL): string | undefined {
  return header(req, 'last-event-id') ?? url.searchParams.get('lastEventId') ?? undefined;
}
