// The client's connection lifecycle: dialing its URLs in turn (with the URL, subprotocols,
// headers and token of each dial, see dial.ts), the connect timeout, in-band authentication,
// reconnecting with backoff or stopping (on refused credentials, or once `maxAttempts`
// reconnects in a row failed), the rpc.ping heartbeat and the server's drain notice
// (rpc.reconnect), and the connection state they move through. Apart from
// RpcClient, which is the call API on top: it builds each connection's Peer and hears of each
// open and loss through ConnectionHost.
import type { Observable } from 'rxjs';
import { Hub } from '../peer/hub.js';
import type { Logger } from '../peer/logger.js';
import type { PeerCore as Peer } from '../peer/peer-core.js';
import { MAX_TIMER_MS } from '../peer/pending-calls.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';
import { NotConnectedError, ReconnectFailedError, TimeoutError } from '../protocol/local-errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { Transport } from '../transport/transport.js';
import { WebSocketTransport } from '../transport/websocket-transport.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import { authFailureOf, isExpiry, refusalOf } from './authentication.js';
import type { DisconnectEvent } from './authentication.js';
import { backoffDelay } from './backoff.js';
import { checkUrl, isNativeSocket } from './client-options.js';
import type { ClientConfig, ReconnectOptions } from './client-options.js';
import type { ConnectionState } from './connection-state.js';
import { openSocket, prepareDial } from './dial.js';
import type { Dial, HttpRefusal } from './dial.js';
import { watchNetwork } from './network-wake.js';
import { redactErrorUrl, redactUrl } from './redact-url.js';

/** The close code the client uses when it gives up on a silent server. */
export const HEARTBEAT_CLOSE_CODE = 4000;

/**
 * How often a connection the server asked us to leave is checked for its last call settling.
 * PeerCore tells nobody when its pending calls reach 0, so this is polled; coarse, because it
 * runs only while a connection is retiring, for at most `connectTimeoutMs`.
 */
const RETIRING_POLL_MS = 50;

/** What the connection needs from the client it serves. */
export interface ConnectionHost<S> {
  /** A Peer over a socket that has just opened, its notifications routed. */
  createPeer(transport: Transport): Peer<S>;
  /** A connection is open: resubscribe and send what was queued. */
  opened(): void;
  /** The open connection was lost; a reconnect follows (unless reconnecting is off). */
  lost(): void;
  /**
   * Closing for good, the state already 'closed': fail what is queued or subscribed with `why`
   * (the AuthenticationError when the server refused the credentials, ReconnectFailedError
   * when `maxAttempts` reconnects in a row failed).
   */
  closing(why: Error): void;
  /** Closed for good, state$ completed: complete what else lives across connections. */
  closed(): void;
}

/** One client's socket, the Peer over it, and getting a new one when it goes. */
export class ClientConnection<S> {
  readonly #urls: readonly string[];
  readonly backoff: Readonly<ReconnectOptions> | false;
  /** Replays the current state to each new observer. */
  readonly stateHub = new Hub<ConnectionState>('connecting', true);
  readonly #disconnectSubject = new Hub<DisconnectEvent>();
  #peer: Peer<S> | undefined;
  /** The peer whose `rpc.authenticate` is not answered yet: nothing else is sent on it. */
  #authenticating: Peer<S> | undefined;
  /** The last ending of a connection or attempt. */
  lastDisconnect: DisconnectEvent | undefined;
  /**
   * That ending in a few words, telling a dial that failed ("HTTP 404", "connect ECONNREFUSED
   * ...") from a connection that opened and was lost ('connection closed with 1012 "..."'):
   * the `lastFailure` of a TimeoutError of a call never sent, and of ReconnectFailedError.
   */
  lastFailure: string | undefined;
  /**
   * The attempt being made: aborted when it is given up (timed out, failed, the client closed),
   * with why. It is getToken's signal, and what its providers give once it aborted is ignored.
   */
  #dialWanted: AbortController | undefined;
  /**
   * Aborted by close(), with why calls fail from then on: the refusal of the credentials,
   * ReconnectFailedError, or NotConnectedError. What waits on the client's life
   * (authenticate()'s getToken) stops there.
   */
  readonly stopped = new AbortController();
  /**
   * Expired credentials (isExpiry) were retried with a fresh token; reset once a connection stays
   * up (resetAfterMs).
   */
  #expiredRetried = false;
  /** The URL of the last dial (the only one known when `url` is a function). */
  #dialedUrl = '';
  /** The current socket. Set only here. */
  socket: WebSocketLike | undefined;
  /** Reconnects made since a connection last stayed open resetAfterMs: what the backoff grows by. */
  #attempt = 0;
  /**
   * Of those, the ones that followed a failure (a dial that failed, a connection lost), not a
   * server's request to move: what `maxAttempts` bounds.
   */
  #failures = 0;
  /** A connection has been open (authenticated, if in-band): the client reconnects from here on. */
  #everOpened = false;
  #urlIndex = 0;
  #reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  #connectTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** A connection the server asked us to leave: it finishes its calls but takes no new ones. */
  #retiring: Peer<S> | undefined;
  /** The connection lost was left on the server's request (rpc.reconnect). */
  #reconnectNow = false;
  /** Stops listening for the browser's network and visibility events. */
  readonly #unwatch: (() => void) | undefined;

  /** The connection state; replays the current one to each new subscriber. */
  readonly state$: Observable<ConnectionState> = this.stateHub.observable;
  /** Why each connection, or attempt at one, ended. Completes when the client closes. */
  readonly disconnects$: Observable<DisconnectEvent> = this.#disconnectSubject.observable;

  constructor(
    private readonly config: ClientConfig,
    private readonly logger: Logger,
    private readonly host: ConnectionHost<S>,
  ) {
    this.#urls = config.urls;
    this.backoff = config.reconnect;
    if (config.networkEvents) this.#unwatch = watchNetwork((online) => this.#wake(online));
  }

  get state(): ConnectionState {
    return this.stateHub.value!;
  }

  /** The URL of the current (or next) connection. */
  get url(): string {
    return this.#urls.length ? this.#urls[this.#urlIndex % this.#urls.length]! : this.#dialedUrl;
  }

  /** `url` as the configured URLs are kept (made absolute, ws: for http:, for a browser's). */
  #asConfigured(url: string): string {
    try {
      return checkUrl(url, 'url', isNativeSocket(this.config.WebSocket));
    } catch {
      return url;
    }
  }

  /** Whether the server asked us to leave `peer` (rpc.reconnect): it carries no new calls. */
  isRetiring(peer: Peer<S>): boolean {
    return peer === this.#retiring;
  }

  /** The peer to send on: open, authenticated, and not one the server asked us to leave. */
  livePeer(): Peer<S> | undefined {
    const peer = this.#peer;
    // A peer whose socket is closing drops what it is sent: calls and notifications made now
    // wait for the next connection as they do while disconnected.
    return peer &&
      !peer.isClosed &&
      !peer.isClosing &&
      peer !== this.#retiring &&
      peer !== this.#authenticating
      ? peer
      : undefined;
  }

  /**
   * Close for good: no timer fires any more, the state is 'closed' (so nothing reconnects),
   * the host fails what waits with `why` (the refusal of the credentials, ReconnectFailedError,
   * or NotConnectedError), then the socket goes.
   */
  async close(why: Error = new NotConnectedError('Client closed')): Promise<void> {
    if (this.state === 'closed') return;
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#connectTimer);
    clearInterval(this.#heartbeatTimer);
    this.#unwatch?.();
    // Before the state moves: whoever hears 'closed' reads why from the signal.
    this.stopped.abort(why);
    this.#dialWanted!.abort(why);
    this.#setState('closed');
    this.host.closing(why);
    const peer = this.#peer;
    const socket = this.socket;
    this.#peer = undefined;
    this.socket = undefined;
    if (peer) {
      peer.close(1000, 'client closed');
      await peer.closed;
    } else if (socket) {
      socket.onopen = null;
      socket.close();
    }
    this.stateHub.complete();
    this.#disconnectSubject.complete();
    this.host.closed();
  }

  connect(): void {
    if (this.state === 'closed') return;
    const wanted = (this.#dialWanted = new AbortController());
    // The providers (url, protocols, headers, getToken) count in the attempt's time.
    this.#connectTimer = setTimeout(
      () => {
        const ms = this.config.connectTimeoutMs;
        this.logger.warn({ url: redactUrl(this.url) }, 'connection attempt timed out');
        const late = new Error(`connection attempt timed out after ${ms} ms`);
        wanted.abort(late); // the providers still at it are forgotten; a socket's onclose reads why
        if (this.socket) return this.socket.close();
        this.#dialFailed(late);
      },
      Math.min(this.config.connectTimeoutMs, MAX_TIMER_MS),
    );
    let prepared: Dial | Promise<Dial>;
    try {
      prepared = prepareDial(this.config, this.url, wanted.signal);
    } catch (err) {
      this.#dialFailed(err);
      return;
    }
    if (!(prepared instanceof Promise)) return this.#dial(prepared, wanted.signal);
    prepared.then(
      (ready) => wanted.signal.aborted || this.#dial(ready, wanted.signal),
      (err: unknown) => wanted.signal.aborted || this.#dialFailed(err),
    );
  }

  /** A provider failed, or the URL or the WebSocket was refused: try again later, elsewhere. */
  #dialFailed(err: unknown, url = this.url, what = 'could not prepare the dial'): void {
    // Never once closed: close() aborts the attempt (whose providers are then ignored) and clears its timer.
    clearTimeout(this.#connectTimer);
    const error = redactErrorUrl(err, url) as Error;
    this.#dialWanted!.abort(error); // getToken, when another provider failed or time ran out
    this.logger.warn({ err: error, url: redactUrl(url) }, what);
    this.#urlIndex++; // a URL the WebSocket refuses will not get better: try the next one
    this.#ended({ error });
  }

  /** Dial: never once closed, for the same reason as #dialFailed. */
  #dial(dial: Dial, wanted: AbortSignal): void {
    const url = (this.#dialedUrl = dial.url);
    // Logged without query string or userinfo: tokens travel there.
    const logUrl = redactUrl(url);
    let refusal: HttpRefusal | undefined;
    let error: Error | undefined;
    let socket: WebSocketLike;
    try {
      socket = openSocket(
        this.config.WebSocket,
        dial,
        this.config.maxMessageBytes,
        (r) => (refusal = r),
      );
    } catch (err) {
      return this.#dialFailed(err, url, 'could not create WebSocket');
    }
    this.socket = socket;
    socket.onerror = (event) => {
      const cause = (event as { error?: unknown }).error;
      if (cause instanceof Error) error = redactErrorUrl(cause, url) as Error;
    };
    socket.onclose = (event) => {
      // Only reached when the socket never opened: afterwards the transport owns onclose.
      clearTimeout(this.#connectTimer);
      if (this.socket !== socket) return;
      this.socket = undefined;
      const httpStatus = refusal?.status;
      this.logger.debug({ url: logUrl, code: event.code, httpStatus }, 'connection attempt failed');
      this.#urlIndex++;
      this.#ended({
        code: event.code,
        reason: refusal?.body || event.reason || undefined,
        httpStatus,
        error: (wanted.reason as Error | undefined) ?? (refusal ? undefined : error),
      });
    };
    socket.onopen = () => {
      clearTimeout(this.#connectTimer);
      if (this.socket !== socket || this.state === 'closed') return;
      this.#onOpen(socket, dial.token);
    };
  }

  #onOpen(socket: WebSocketLike, token: string | undefined): void {
    const codec = this.config.encoding;
    // The gateway may answer in JSON: the codec only when its subprotocol was chosen.
    const encoded = codec && socket.protocol === codec.subprotocol ? codec : undefined;
    const peer = this.host.createPeer(
      new WebSocketTransport(socket, encoded, {
        maxBufferedBytes: this.config.maxBufferedBytes,
      }),
    );
    this.#peer = peer;
    // The backoff is not reset here: a server that accepts and closes at once would be
    // redialled at the initial delay forever. It is reset when a connection that has
    // stayed open long enough is lost.
    const openedAt = Date.now();
    this.#startHeartbeat(peer);
    let failure: Error | undefined;
    void peer.closed.then(({ code, reason }) => {
      clearInterval(this.#heartbeatTimer);
      if (this.#peer !== peer) return;
      this.#peer = undefined;
      this.#authenticating = undefined;
      this.socket = undefined;
      if (this.backoff !== false && Date.now() - openedAt >= this.backoff.resetAfterMs) {
        this.#attempt = 0;
        this.#failures = 0;
        this.#expiredRetried = false;
      }
      this.logger.info({ code, reason }, 'connection lost');
      this.host.lost();
      this.#ended({ code, reason: reason || undefined, error: failure }, true);
    });
    // No token without getToken (or with the header transport): nothing to authenticate here.
    if (token === undefined) return this.#ready(peer);
    // In-band: the token goes first; calls and resubscribes wait for its answer.
    this.#authenticating = peer;
    peer
      .call(ReservedMethod.Authenticate, { token }, { timeoutMs: this.config.connectTimeoutMs })
      .then(
        () => this.#authenticating === peer && this.#ready(peer),
        (err: unknown) => {
          if (this.#authenticating !== peer || peer.isClosed) return;
          if (err instanceof JsonRpcError && err.code === ErrorCode.MethodNotFound) {
            this.logger.warn({}, 'server has no rpc.authenticate: going on without it');
            return this.#ready(peer);
          }
          // A refusal for "unavailable" is the server's trouble, not the token's (the hook timed
          // out, a key set or the deny list could not be read): retried as an upgrade's 503 is.
          const refused = refusalOf(err);
          const stop = refused && refused.reason !== 'unavailable' ? refused : undefined;
          failure = stop ?? (err as Error);
          // Anything else (no answer in time, -32000 past maxConnectionsPerUser) is retried.
          peer.close(stop ? 4401 : 1000, stop ? 'authentication refused' : 'authentication failed');
        },
      );
  }

  /**
   * The connection may carry calls: resubscribe and send what was queued. Never for one that
   * is closed or closing (its close frame read with the reply that opened it), or that the
   * server asked us to leave: 'open' would send calls to nowhere.
   */
  #ready(peer: Peer<S>): void {
    if (this.#authenticating === peer) this.#authenticating = undefined;
    if (peer.isClosed || peer.isClosing || peer === this.#retiring) return;
    this.#everOpened = true;
    this.#setState('open');
    this.host.opened();
  }

  #startHeartbeat(peer: Peer<S>): void {
    const heartbeat = this.config.heartbeat;
    if (heartbeat === false) return;
    clearInterval(this.#heartbeatTimer);
    this.#heartbeatTimer = setInterval(() => this.#probe(peer), heartbeat.intervalMs);
  }

  /** rpc.ping: no answer within the heartbeat's timeoutMs, and the connection is given up. */
  #probe(peer: Peer<S>): void {
    const heartbeat = this.config.heartbeat;
    if (heartbeat === false) return;
    const { timeoutMs } = heartbeat;
    peer.call(ReservedMethod.Ping, undefined, { timeoutMs }).catch((err: unknown) => {
      if (!(err instanceof TimeoutError) || peer.isClosed) return;
      this.logger.warn({ timeoutMs }, 'server did not answer rpc.ping: reconnecting');
      peer.close(HEARTBEAT_CLOSE_CODE, 'heartbeat timeout');
    });
  }

  /**
   * The network or the page is back (`online`), or the network went: an open connection is
   * probed at once (one that died meanwhile is found now, not at the next heartbeat), and a
   * reconnect waiting out its backoff dials now when the network is back.
   */
  #wake(online: boolean): void {
    const peer = this.livePeer();
    if (peer) return this.#probe(peer);
    if (!online || this.#reconnectTimer === undefined) return;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    this.logger.debug({ url: redactUrl(this.url) }, 'network back: dialling now');
    this.connect();
  }

  /** A reserved notification of the server's, other than rpc.joined. */
  onReservedNotification(method: string, params: Params | undefined): void {
    if (method !== ReservedMethod.Reconnect) return;
    // The server is draining: go elsewhere now rather than wait for the close. It may name
    // where: one of our URLs is taken next; any other, or none, means our own next URL.
    const target = params && !Array.isArray(params) ? (params as { url?: unknown }).url : undefined;
    const named = typeof target === 'string' ? this.#urls.indexOf(this.#asConfigured(target)) : -1;
    if (typeof target === 'string' && named < 0) {
      this.logger.info({ url: redactUrl(target) }, 'server asked to reconnect elsewhere');
    }
    const peer = this.#peer;
    if (!peer || peer.isClosed || this.#retiring === peer) return;
    // The server is draining. New calls queue for the next connection; the calls this one
    // carries finish first, for at most connectTimeoutMs (the state is 'reconnecting', and
    // that is how long a reconnect may take); then it is closed and replaced.
    this.#retiring = peer;
    if (named >= 0) this.#urlIndex = named;
    else this.#urlIndex++;
    this.#reconnectNow = true;
    if (this.#authenticating === peer) {
      // Never open: only its rpc.authenticate went out, so there is nothing to finish, and its
      // answer, even one already read, no longer opens it.
      this.#authenticating = undefined;
      return peer.close(1000, 'reconnecting on server request');
    }
    this.#setState('reconnecting');
    const until = Date.now() + this.config.connectTimeoutMs;
    // Closing at the deadline rejects the calls still out with ConnectionClosedError, as on any
    // lost connection. Closed otherwise meanwhile (client.close(), the server), the polling
    // stops at once: no timer outlives the connection.
    let poll: ReturnType<typeof setTimeout> | undefined;
    void peer.closed.then(() => clearTimeout(poll));
    const closeWhenSettled = (): void => {
      // The server's calls to this client too: their answers have only this connection to go by.
      const busy = peer.pendingCount || peer.inFlightCount;
      if (busy && Date.now() < until) poll = setTimeout(closeWhenSettled, RETIRING_POLL_MS);
      else
        peer.close(
          1000,
          busy ? 'reconnect deadline: calls unfinished' : 'reconnecting on server request',
        );
    };
    closeWhenSettled();
  }

  /**
   * A connection (`wasOpen`) or attempt ended: tell `disconnects$`, then dial again or, when
   * reconnecting is off, the credentials were refused (and `onAuthFailure` is 'stop') or
   * `maxAttempts` reconnects in a row have failed, close for good.
   */
  #ended(event: Omit<DisconnectEvent, 'willRetry'>, wasOpen = false): void {
    if (this.state === 'closed') return;
    const refused = authFailureOf(event);
    const backoff = this.backoff;
    // Expired credentials (a 4419 close, or a token refused as expired when connecting) are
    // retried once: the provider can mint a fresh token.
    const freshToken =
      !!refused && isExpiry(refused) && !!this.config.getToken && !this.#expiredRetried;
    const mayRetry =
      backoff !== false && (!refused || backoff.onAuthFailure === 'retry' || freshToken);
    // #failures counts the reconnects made after a failure since a connection last stayed open
    // resetAfterMs, each of which has now failed: this ending is the last one allowed when it
    // reaches the bound. A move the server asked for (rpc.reconnect) is not a failure: it never
    // exhausts the attempts, and the reconnect it makes is not counted.
    const maxAttempts = backoff === false ? Infinity : backoff.maxAttempts;
    const exhausted = mayRetry && !this.#reconnectNow && this.#failures >= maxAttempts;
    const willRetry = mayRetry && !exhausted;
    if (freshToken) this.#expiredRetried = true;
    const told: DisconnectEvent = { ...event, error: refused ?? event.error, willRetry };
    this.lastDisconnect = told;
    this.lastFailure = describeEnding(told, wasOpen);
    this.#disconnectSubject.next(told);
    if (refused) {
      const { code, status: httpStatus, reason } = refused;
      this.logger.warn(
        { code, httpStatus, reason },
        willRetry ? 'credentials refused: dialling again' : 'credentials refused: client closed',
      );
    }
    if (willRetry) return this.#scheduleReconnect();
    if (!exhausted) return void this.close(refused);
    const gaveUp = new ReconnectFailedError(maxAttempts, this.lastFailure);
    this.logger.warn(
      { attempts: maxAttempts, lastFailure: this.lastFailure },
      'reconnect attempts exhausted: client closed',
    );
    void this.close(gaveUp);
  }

  #scheduleReconnect(): void {
    if (this.state === 'closed' || this.backoff === false) return;
    this.#setState(this.#everOpened ? 'reconnecting' : 'connecting');
    // Asked by the server to move while the backoff stands at its start: it is draining, not
    // failing, so no delay. The move still grows the backoff, and the count is reset only by
    // a connection that stays up resetAfterMs: a server that asks every connection to leave at
    // once is redialled ever more slowly, like one that closes them. It is not a failed
    // attempt, though: maxAttempts counts only those.
    const attempt = this.#attempt++;
    if (!this.#reconnectNow) this.#failures++;
    const delayMs = this.#reconnectNow && attempt === 0 ? 0 : backoffDelay(attempt, this.backoff);
    this.#reconnectNow = false;
    this.logger.debug({ attempt, delayMs, url: redactUrl(this.url) }, 'reconnect scheduled');
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.connect();
    }, delayMs);
  }

  /** Move to `state`; a state is never emitted twice in a row. */
  #setState(state: ConnectionState): void {
    if (this.stateHub.value! !== state) this.stateHub.next(state);
  }
}

/**
 * A connection's or attempt's end in a few words, for `lastFailure`: a dial's refusal (its HTTP
 * status), its error, or its close; a connection that was open, "connection closed with" its
 * close (the words ReconnectFailedError and TimeoutError read it by), and the error it closed on.
 */
function describeEnding(event: DisconnectEvent, wasOpen: boolean): string | undefined {
  const reason = event.reason ? ` ${JSON.stringify(event.reason.slice(0, 100))}` : '';
  const error = event.error?.message.slice(0, 200);
  if (wasOpen) {
    return `connection closed with ${event.code ?? 1006}${reason}${error ? `: ${error}` : ''}`;
  }
  if (event.httpStatus !== undefined) return `HTTP ${event.httpStatus}${reason}`;
  if (error) return error;
  return event.code === undefined ? undefined : `closed ${event.code}${reason} before opening`;
}
