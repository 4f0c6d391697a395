import { BehaviorSubject, Subject, filter, firstValueFrom, map } from 'rxjs';
import type { Observable } from 'rxjs';
import { silentLogger } from '../peer/logger.js';
import type { Logger } from '../peer/logger.js';
import { nameOf } from '../peer/method-descriptor.js';
import type {
  MethodDescriptor,
  NotificationDescriptor,
  SubscriptionDescriptor,
} from '../peer/method-descriptor.js';
import { MethodRegistry } from '../peer/method-registry.js';
import type { Handler } from '../peer/method-registry.js';
import { notificationsNamed } from '../peer/notifications.js';
import { Peer } from '../peer/peer.js';
import type { BatchEntry, IncomingNotification } from '../peer/peer.js';
import { MAX_TIMER_MS } from '../peer/pending-calls.js';
import type { CallOptions } from '../peer/pending-calls.js';
import { encodeNotification, encodeRequest } from '../protocol/encode.js';
import type { JsonRpcError } from '../protocol/errors.js';
import { CancelledError, NotConnectedError, TimeoutError } from '../protocol/local-errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import { WebSocketTransport } from '../transport/websocket-transport.js';
import type { WebSocketConstructor, WebSocketLike } from '../transport/websocket-transport.js';
import { backoffDelay, defaultBackoff } from './backoff.js';
import type { BackoffOptions } from './backoff.js';
import { BatchWatchTransport } from './batch-watch.js';
import type { ConnectionState } from './connection-state.js';
import { OfflineQueue } from './offline-queue.js';
import { redactErrorUrl, redactUrl } from './redact-url.js';
import { ClientSubscriptions } from './subscriptions.js';
import type { ClientSubscriptionMethods, SubscriptionEvent } from './subscriptions.js';

/** The close code the client uses when it gives up on a silent server. */
export const HEARTBEAT_CLOSE_CODE = 4000;

export interface ClientOptions {
  /** Gateway URL, or several: on failure the client moves on to the next one. */
  url: string | readonly string[];
  /** WebSocket class. Default `globalThis.WebSocket`; in Node 20 pass `WebSocket` from `ws`. */
  WebSocket?: WebSocketConstructor;
  /** Subprotocols to offer (e.g. a token, since browsers cannot set headers). */
  protocols?: string | string[];
  /**
   * Reconnect with capped exponential backoff; `false` to stay closed after a drop. The
   * backoff starts again from `initialDelayMs` only once a connection has stayed open for
   * `resetAfterMs` (default 5 s). The same backoff paces resubscribing after a transient
   * subscribe error (-32009 Broker unavailable, a timeout).
   */
  reconnect?: Partial<BackoffOptions> | false;
  /** Give up on a connection attempt after this many ms. Default 10 000. */
  connectTimeoutMs?: number;
  /** Default timeout of calls in ms; 0 waits forever. Default 30 000. */
  callTimeout?: number;
  /** Calls made while not connected: queue them until the next connection (default) or reject at once. */
  whenDisconnected?: 'queue' | 'reject';
  /** Most calls and notifications queued while disconnected. Default 100. */
  maxQueued?: number;
  /** Most calls awaiting a response at once. Default 1 024. */
  maxPendingCalls?: number;
  /**
   * Gather the calls and notifications made in one turn into one JSON-RPC batch
   * of up to this many (fewer frames; meant for browsers, where a WebSocket
   * cannot be corked). Default 0: off. Keep it at or below the server's maxBatch.
   */
  batchCalls?: number;
  /**
   * Liveness probe: every `intervalMs` the client sends `rpc.ping`; no answer within
   * `timeoutMs` means the server is gone silent, and the client reconnects (a browser
   * cannot send WebSocket pings). `false` disables. Default { intervalMs: 20 000, timeoutMs: 10 000 }.
   */
  heartbeat?: { intervalMs?: number; timeoutMs?: number } | false;
  /** Must match the gateway's `subscriptionMethods`. Default subscribe / subscription / unsubscribe. */
  subscriptionMethods?: Partial<ClientSubscriptionMethods>;
  logger?: Logger;
}

/**
 * A JSON-RPC 2.0 client over WebSocket for browsers and Node. It connects on
 * construction, reconnects by itself, answers the server's calls from its own
 * registry, and exposes notifications and its connection state as Observables
 * that live across reconnects.
 */
export class RpcClient {
  readonly registry = new MethodRegistry<RpcClient>();
  private readonly urls: readonly string[];
  private readonly WebSocketImpl: WebSocketConstructor;
  private readonly backoff: BackoffOptions | false;
  private readonly logger: Logger;
  private readonly queue: OfflineQueue;
  private readonly stateSubject = new BehaviorSubject<ConnectionState>('connecting');
  private readonly notificationSubject = new Subject<IncomingNotification>();
  private readonly subscriptions: ClientSubscriptions;
  private peer: Peer<RpcClient> | undefined;
  /** The transport under `peer`, which notices a batch the server refused as a whole. */
  private watch: BatchWatchTransport | undefined;
  private socket: WebSocketLike | undefined;
  private attempt = 0;
  private everOpened = false;
  private urlIndex = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private connectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** A connection the server asked us to leave: it finishes its calls but takes no new ones. */
  private retiring: Peer<RpcClient> | undefined;
  private reconnectNow = false;

  /** The connection state; replays the current one to each new subscriber. */
  readonly state$: Observable<ConnectionState> = this.stateSubject.asObservable();
  /** Every notification the server sends, across reconnects. */
  readonly notifications$: Observable<IncomingNotification> =
    this.notificationSubject.asObservable();

  constructor(private readonly options: ClientOptions) {
    this.urls = typeof options.url === 'string' ? [options.url] : [...options.url];
    if (this.urls.length === 0) throw new TypeError('At least one URL is required');
    const impl =
      options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!impl) {
      throw new TypeError(
        'No WebSocket implementation: pass { WebSocket } (in Node 20: import { WebSocket } from "ws")',
      );
    }
    this.WebSocketImpl = impl;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- read by the getter below
    const client = this;
    this.backoff =
      options.reconnect === false ? false : { ...defaultBackoff, ...options.reconnect };
    this.logger = options.logger ?? silentLogger;
    this.queue = new OfflineQueue(options.maxQueued ?? 100);
    this.subscriptions = new ClientSubscriptions(
      {
        call: (method, params) => this.call(method, params),
        subscribe: (method, params) => this.callUntimedWhileQueued(method, params),
        retryDelay: (attempt) =>
          backoffDelay(attempt, this.backoff === false ? defaultBackoff : this.backoff),
        get isOpen() {
          return client.livePeer() !== undefined;
        },
        get isClosed() {
          return client.state === 'closed';
        },
      },
      {
        subscribe: 'subscribe',
        notification: 'subscription',
        unsubscribe: 'unsubscribe',
        ...options.subscriptionMethods,
      },
      this.logger,
    );
    this.connect();
  }

  get state(): ConnectionState {
    return this.stateSubject.value;
  }

  /** The URL of the current (or next) connection. */
  get url(): string {
    return this.urls[this.urlIndex % this.urls.length]!;
  }

  /** Resolves when the client is connected; rejects if it is closed first. */
  async opened(): Promise<void> {
    // state$ has completed once closed, so it must not be awaited then.
    if (this.state === 'closed') throw new NotConnectedError('Client closed');
    const state = await firstValueFrom(
      this.state$.pipe(filter((s) => s === 'open' || s === 'closed')),
    );
    if (state === 'closed') throw new NotConnectedError('Client closed');
  }

  /** Register a handler the server can call (`session.call(...)`). */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<RpcClient, P, R>,
  ): () => void {
    return this.registry.method(descriptor, handler);
  }

  notificationsOf<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P> | string,
  ): Observable<P> {
    return notificationsNamed(this.notificationSubject, descriptor);
  }

  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    params: NoInfer<P>,
    options?: CallOptions,
  ): Promise<R>;
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options: CallOptions = {},
  ): Promise<unknown> {
    const method = nameOf(target);
    const peer = this.livePeer();
    if (peer) return peer.call(method, params, options);
    return this.whileDisconnected(
      method,
      options,
      () => encodeRequest(0, method, params),
      (timeout) => this.requirePeer().call(method, params, { ...options, timeout }),
    );
  }

  /** Send a notification; while disconnected it is queued (or throws, with `whenDisconnected: 'reject'`). */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    params: NoInfer<P>,
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    const method = nameOf(target);
    const peer = this.livePeer();
    if (peer) return peer.notify(method, params);
    this.assertMayQueue();
    // Params that cannot be encoded throw now, as they do while connected, not in the flush.
    encodeNotification(method, params);
    // A notification has no caller waiting, so a failure to queue or send is only logged.
    this.queue
      .enqueue(method, { timeout: 0 }, 0, () => {
        this.requirePeer().notify(method, params);
        return Promise.resolve();
      })
      .catch((err: unknown) => this.logger.warn({ err, method }, 'queued notification dropped'));
  }

  /**
   * Subscribe to a topic or per-subscriber stream. The Observable is cold and
   * shared: the first Observer subscribes on the server, the last one's
   * unsubscribe ends it there, and it is re-established after every reconnect.
   * A rejected subscribe arrives as an error (a JsonRpcError); a stream's end
   * as completion.
   */
  subscribe<P, T>(descriptor: SubscriptionDescriptor<P, T>, params?: NoInfer<P>): Observable<T>;
  subscribe<T = unknown>(topic: string, params?: unknown): Observable<T>;
  subscribe(target: SubscriptionDescriptor | string, params?: unknown): Observable<unknown> {
    return this.subscribeWithMeta(nameOf(target), params).pipe(
      filter((event) => event.gap === undefined), // gaps are told through subscribeWithMeta
      map((event) => event.data),
    );
  }

  /** Like `subscribe`, with each message's sequence number and missed count. */
  subscribeWithMeta<T = unknown>(
    topic: string,
    params?: unknown,
  ): Observable<SubscriptionEvent<T>> {
    return this.subscriptions.observe<T>(topic, params);
  }

  /** Send calls and notifications in one frame; one settled result per entry, in order. */
  batch(
    entries: readonly BatchEntry[],
    options: CallOptions = {},
  ): Promise<PromiseSettledResult<unknown>[]> {
    const peer = this.livePeer();
    if (peer) return this.sendBatch(peer, entries, options);
    return this.whileDisconnected(
      'batch',
      options,
      () => {
        for (const entry of entries) encodeRequest(0, entry.method, entry.params);
      },
      (timeout) => this.sendBatch(this.requirePeer(), entries, { ...options, timeout }),
    );
  }

  /** Close for good: pending and queued calls reject, no reconnect follows. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.connectTimer);
    clearInterval(this.heartbeatTimer);
    this.setState('closed');
    this.queue.failAll(new NotConnectedError('Client closed'));
    this.subscriptions.closeAll();
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
    this.notificationSubject.complete();
  }

  private livePeer(): Peer<RpcClient> | undefined {
    const peer = this.peer;
    return peer && !peer.isClosed && peer !== this.retiring ? peer : undefined;
  }

  private requirePeer(): Peer<RpcClient> {
    const peer = this.livePeer();
    if (!peer) throw new NotConnectedError('Not connected');
    return peer;
  }

  private assertMayQueue(): void {
    if (this.state === 'closed') throw new NotConnectedError('Client closed');
    if (this.options.whenDisconnected === 'reject') throw new NotConnectedError('Not connected');
  }

  /**
   * Queue a call made while disconnected. `check` encodes it first, so params that cannot be
   * serialised reject now, as they do while connected, instead of failing in the flush.
   */
  private whileDisconnected<T>(
    method: string,
    options: CallOptions,
    check: () => void,
    send: (timeout: number) => Promise<T>,
  ): Promise<T> {
    try {
      this.assertMayQueue();
      check();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.queue.enqueue(method, options, this.options.callTimeout ?? 30_000, send);
  }

  /**
   * A subscribe: while disconnected it waits in the queue without a timeout (it is the
   * resubscription the next connection needs, however long that takes); once sent, the
   * default callTimeout applies.
   */
  private callUntimedWhileQueued(method: string, params: Params): Promise<unknown> {
    const peer = this.livePeer();
    if (peer) return peer.call(method, params);
    return this.whileDisconnected(
      method,
      { timeout: 0 },
      () => encodeRequest(0, method, params),
      () => this.requirePeer().call(method, params),
    );
  }

  /**
   * Send a batch, watching for the server refusing it as a whole (-32002, id null): then
   * every call in it rejects at once with that error rather than wait for its timeout.
   */
  private sendBatch(
    peer: Peer<RpcClient>,
    entries: readonly BatchEntry[],
    options: CallOptions,
  ): Promise<PromiseSettledResult<unknown>[]> {
    const watch = this.watch;
    if (!watch || !entries.some((entry) => !entry.notification)) {
      return peer.batch(entries, options);
    }
    // The members are given up through their signal: the peer has no other way in.
    const giveUp = new AbortController();
    const signal = options.signal;
    const forward = (): void => giveUp.abort(signal?.reason);
    if (signal?.aborted) forward();
    else signal?.addEventListener('abort', forward, { once: true });
    let refusal: JsonRpcError | undefined;
    const unwatch = watch.watch(entries.length, (err) => {
      refusal = err;
      giveUp.abort(err);
    });
    const done = (): void => {
      unwatch();
      signal?.removeEventListener('abort', forward);
    };
    return peer.batch(entries, { ...options, signal: giveUp.signal }).then(
      (results) => {
        done();
        if (!refusal) return results;
        const reason = refusal;
        return results.map((result) =>
          result.status === 'rejected' &&
          result.reason instanceof CancelledError &&
          result.reason.reason === reason
            ? { status: 'rejected', reason }
            : result,
        );
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
  }

  private connect(): void {
    if (this.state === 'closed') return;
    const url = this.url;
    // Logged without query string or userinfo: tokens travel there.
    const logUrl = redactUrl(url);
    let socket: WebSocketLike;
    try {
      socket = new this.WebSocketImpl(url, this.options.protocols) as WebSocketLike;
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
      Math.min(this.options.connectTimeoutMs ?? 10_000, MAX_TIMER_MS),
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
    const peer = new Peer<RpcClient>(watch, {
      registry: this.registry,
      session: this,
      logger: this.logger,
      callTimeout: this.options.callTimeout,
      maxPendingCalls: this.options.maxPendingCalls,
      batchOutgoing: this.options.batchCalls,
      onReservedNotification: (method, params) => this.onReservedNotification(method, params),
    });
    this.peer = peer;
    this.watch = watch;
    // The backoff is not reset here: a server that accepts and closes at once would be
    // redialled at the initial delay forever. It is reset when a connection that has
    // stayed open long enough is lost.
    const openedAt = Date.now();
    this.everOpened = true;
    const subscriptionNotification = this.subscriptions.methods.notification;
    peer.notifications$.subscribe((n) => {
      if (n.method === subscriptionNotification && this.subscriptions.handleNotification(n.params))
        return;
      this.notificationSubject.next(n);
    });
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
      this.subscriptions.connectionLost();
      this.scheduleReconnect();
    });
    this.setState('open');
    this.subscriptions.connectionOpened();
    this.queue.flush();
  }

  private startHeartbeat(peer: Peer<RpcClient>): void {
    const options = this.options.heartbeat;
    if (options === false) return;
    const intervalMs = options?.intervalMs ?? 20_000;
    const timeoutMs = options?.timeoutMs ?? 10_000;
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(() => {
      peer.call(ReservedMethod.Ping, undefined, { timeout: timeoutMs }).catch((err: unknown) => {
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

/** Create a client; it starts connecting at once. */
export function createClient(options: ClientOptions): RpcClient {
  return new RpcClient(options);
}
