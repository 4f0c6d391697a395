// The client's connection lifecycle: dialing its URLs in turn, the connect timeout, reconnecting
// with backoff, the rpc.ping heartbeat and the server's drain notice (rpc.reconnect), and the
// connection state they move through. Apart from RpcClient, which is the call API on top: it
// builds each connection's Peer and hears of each open and loss through ConnectionHost.
import { BehaviorSubject } from 'rxjs';
import type { Observable } from 'rxjs';
import type { Logger } from '../peer/logger.js';
import type { Peer } from '../peer/peer.js';
import { MAX_TIMER_MS } from '../peer/pending-calls.js';
import { TimeoutError } from '../protocol/local-errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import { WebSocketTransport } from '../transport/websocket-transport.js';
import type { WebSocketLike } from '../transport/websocket-transport.js';
import { backoffDelay } from './backoff.js';
import type { BackoffOptions } from './backoff.js';
import { BatchWatchTransport } from './batch-watch.js';
import type { ClientConfig } from './client-options.js';
import type { ConnectionState } from './connection-state.js';
import { redactErrorUrl, redactUrl } from './redact-url.js';

/** The close code the client uses when it gives up on a silent server. */
export const HEARTBEAT_CLOSE_CODE = 4000;

/** What the connection needs from the client it serves. */
export interface ConnectionHost<S> {
  /** A Peer over a socket that has just opened, its notifications routed. */
  createPeer(
    transport: BatchWatchTransport,
    onReservedNotification: (method: string, params: Params | undefined) => void,
  ): Peer<S>;
  /** A connection is open: resubscribe and send what was queued. */
  opened(): void;
  /** The open connection was lost; a reconnect follows (unless reconnecting is off). */
  lost(): void;
  /** Closing for good, the state already 'closed': fail what is queued or subscribed. */
  closing(): void;
  /** Closed for good, state$ completed: complete what else lives across connections. */
  closed(): void;
}

/** One client's socket, the Peer over it, and getting a new one when it goes. */
export class ClientConnection<S> {
  private readonly urls: readonly string[];
  readonly backoff: Readonly<BackoffOptions> | false;
  private readonly stateSubject = new BehaviorSubject<ConnectionState>('connecting');
  private peer: Peer<S> | undefined;
  /**
   * The transport under `peer`, which notices a batch the server refused as a whole. Read by
   * the client; set only here.
   */
  watch: BatchWatchTransport | undefined;
  /** The current socket. Set only here. */
  socket: WebSocketLike | undefined;
  private attempt = 0;
  private everOpened = false;
  private urlIndex = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private connectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** A connection the server asked us to leave: it finishes its calls but takes no new ones. */
  private retiring: Peer<S> | undefined;
  private reconnectNow = false;

  /** The connection state; replays the current one to each new subscriber. */
  readonly state$: Observable<ConnectionState> = this.stateSubject.asObservable();

  constructor(
    private readonly config: ClientConfig,
    private readonly logger: Logger,
    private readonly host: ConnectionHost<S>,
  ) {
    this.urls = config.urls;
    this.backoff = config.reconnect;
  }

  get state(): ConnectionState {
    return this.stateSubject.value;
  }

  /** The URL of the current (or next) connection. */
  get url(): string {
    return this.urls[this.urlIndex % this.urls.length]!;
  }

  /** The peer to send on: open, and not one the server asked us to leave. */
  livePeer(): Peer<S> | undefined {
    const peer = this.peer;
    return peer && !peer.isClosed && peer !== this.retiring ? peer : undefined;
  }

  /**
   * Close for good: no timer fires any more, the state is 'closed' (so nothing reconnects),
   * the host fails what waits, then the socket goes.
   */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.connectTimer);
    clearInterval(this.heartbeatTimer);
    this.setState('closed');
    this.host.closing();
    const peer = this.peer;
    const socket = this.socket;
    this.peer = undefined;
    this.watch = undefined;
    this.socket = undefined;
    if (peer) {
      peer.close(1000, 'client closed');
      await peer.closed;
    } else if (socket) {
      socket.onopen = null;
      socket.close();
    }
    this.stateSubject.complete();
    this.host.closed();
  }

  connect(): void {
    if (this.state === 'closed') return;
    const url = this.url;
    // Logged without query string or userinfo: tokens travel there.
    const logUrl = redactUrl(url);
    let socket: WebSocketLike;
    try {
      socket = new this.config.WebSocket(url, this.config.protocols) as WebSocketLike;
    } catch (err) {
      this.logger.warn(
        { err: redactErrorUrl(err, url), url: logUrl },
        'could not create WebSocket',
      );
      this.urlIndex++; // a URL the WebSocket refuses will not get better: try the next one
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    this.connectTimer = setTimeout(
      () => {
        this.logger.warn({ url: logUrl }, 'connection attempt timed out');
        socket.close();
      },
      Math.min(this.config.connectTimeoutMs, MAX_TIMER_MS),
    );
    socket.onerror = () => undefined;
    socket.onclose = (event) => {
      // Only reached when the socket never opened: afterwards the transport owns onclose.
      clearTimeout(this.connectTimer);
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.logger.debug({ url: logUrl, code: event.code }, 'connection attempt failed');
      this.urlIndex++;
      this.scheduleReconnect();
    };
    socket.onopen = () => {
      clearTimeout(this.connectTimer);
      if (this.socket !== socket || this.state === 'closed') return;
      this.onOpen(socket);
    };
  }

  private onOpen(socket: WebSocketLike): void {
    const watch = new BatchWatchTransport(new WebSocketTransport(socket));
    const peer = this.host.createPeer(watch, (method, params) =>
      this.onReservedNotification(method, params),
    );
    this.peer = peer;
    this.watch = watch;
    // The backoff is not reset here: a server that accepts and closes at once would be
    // redialled at the initial delay forever. It is reset when a connection that has
    // stayed open long enough is lost.
    const openedAt = Date.now();
    this.everOpened = true;
    this.startHeartbeat(peer);
    void peer.closed.then(({ code, reason }) => {
      clearInterval(this.heartbeatTimer);
      if (this.peer !== peer) return;
      this.peer = undefined;
      this.watch = undefined;
      this.socket = undefined;
      if (this.backoff !== false && Date.now() - openedAt >= this.backoff.resetAfterMs) {
        this.attempt = 0;
      }
      this.logger.info({ code, reason }, 'connection lost');
      this.host.lost();
      this.scheduleReconnect();
    });
    this.setState('open');
    this.host.opened();
  }

  private startHeartbeat(peer: Peer<S>): void {
    const heartbeat = this.config.heartbeat;
    if (heartbeat === false) return;
    const { intervalMs, timeoutMs } = heartbeat;
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(() => {
      peer.call(ReservedMethod.Ping, undefined, { timeoutMs }).catch((err: unknown) => {
        if (!(err instanceof TimeoutError) || peer.isClosed) return;
        this.logger.warn({ timeoutMs }, 'server did not answer rpc.ping: reconnecting');
        peer.close(HEARTBEAT_CLOSE_CODE, 'heartbeat timeout');
      });
    }, intervalMs);
  }

  private onReservedNotification(method: string, params: Params | undefined): void {
    if (method !== ReservedMethod.Reconnect) return;
    // The server is draining: go elsewhere now rather than wait for the close. It may name
    // where: one of our URLs is taken next; any other, or none, means our own next URL.
    const target = params && !Array.isArray(params) ? (params as { url?: unknown }).url : undefined;
    const named = typeof target === 'string' ? this.urls.indexOf(target) : -1;
    if (typeof target === 'string' && named < 0) {
      this.logger.info({ url: redactUrl(target) }, 'server asked to reconnect elsewhere');
    }
    const peer = this.peer;
    if (!peer || peer.isClosed || this.retiring === peer) return;
    // The server is draining. New calls queue for the next connection; the calls
    // this one carries finish first; then it is closed and replaced at once.
    this.retiring = peer;
    if (named >= 0) this.urlIndex = named;
    else this.urlIndex++;
    this.reconnectNow = true;
    this.setState('reconnecting');
    const closeWhenSettled = (): void => {
      if (peer.isClosed) return;
      if (peer.pendingCount === 0) peer.close(1000, 'reconnecting on server request');
      else setTimeout(closeWhenSettled, 10);
    };
    closeWhenSettled();
  }

  private scheduleReconnect(): void {
    if (this.state === 'closed') return;
    if (this.backoff === false) {
      void this.close();
      return;
    }
    this.setState(this.everOpened ? 'reconnecting' : 'connecting');
    // Asked by the server to move: no backoff, the server is not failing.
    const attempt = this.attempt;
    const delayMs = this.reconnectNow ? 0 : backoffDelay(this.attempt++, this.backoff);
    this.reconnectNow = false;
    this.logger.debug({ attempt, delayMs, url: redactUrl(this.url) }, 'reconnect scheduled');
    this.reconnectTimer = setTimeout(() => this.connect(), delayMs);
  }

  /** Move to `state`; a state is never emitted twice in a row. */
  private setState(state: ConnectionState): void {
    if (this.stateSubject.value !== state) this.stateSubject.next(state);
  }
}
