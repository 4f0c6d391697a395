import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import type { Server as TcpServer, Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { createServer as createTlsServer } from 'node:tls';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { nanoid } from 'nanoid';
import { Subject } from 'rxjs';
import type { Observable, Subscription } from 'rxjs';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import type { Logger } from '../peer/logger.js';
import type { MethodDescriptor } from '../peer/method-descriptor.js';
import { MethodRegistry } from '../peer/method-registry.js';
import type { Handler } from '../peer/method-registry.js';
import { LazyChildLogger } from '../peer/lazy-child-logger.js';
import { AnsweringPeer } from '../peer/answering-peer.js';
import { Peer } from '../peer/peer.js';
import { peerConfig } from '../peer/peer.js';
import type { CloseInfo, PeerConfig } from '../peer/peer.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { Broker } from '../pubsub/broker.js';
import type { FlowControl } from '../pubsub/delivery.js';
import { MemoryBroker } from '../pubsub/memory-broker.js';
import { NdjsonTransport } from '../transport/ndjson-transport.js';
import { CloseCode } from '../transport/transport.js';
import type { ServerTransport } from '../transport/transport.js';
import { TransportSocket, WsTransport } from '../transport/ws-transport.js';
import { Heartbeat } from './heartbeat.js';
import { sendText, serveHealth } from './http-routes.js';
import type { Readiness } from './http-routes.js';
import { Admission } from './admission.js';
import { createLogger } from './logger.js';
import { GatewayMetrics } from './metrics.js';
import { PREFERRED_SUBPROTOCOL, defaultLimits } from './options.js';
import { TokenBucket } from './token-bucket.js';
import type { GatewayLimits, GatewayOptions, UpgradeRequest } from './options.js';
import { PubSubService, defaultSubscriptionMethods } from './pubsub-service.js';
import type { StreamHandler, TopicOptions } from './pubsub-service.js';
import { Session } from './session.js';
import { SessionRouter } from './session-router.js';
import { rejectUpgrade } from './upgrade-rejection.js';
import { runAuthenticate } from './run-authenticate.js';
import { describeStream, describeUpgrade } from './upgrade-request.js';
import { TrustedProxies } from './client-address.js';
import { HttpRpc } from './http-rpc.js';
import { streamRefusal } from './stream-refusal.js';

export interface DrainOptions {
  /** How long in-flight calls may take to finish before their sessions are closed anyway. Default 10 000 ms. */
  deadlineMs?: number;
  /** Sent in the rpc.reconnect notice: where clients should go instead (optional). */
  reconnectUrl?: string;
}

export interface CloseOptions {
  /** Close code sent to every client. Default 1001 (going away). */
  code?: number;
  reason?: string;
  /** How long to wait for clients to finish the closing handshake before cutting them off. Default 5 000 ms. */
  timeoutMs?: number;
}

/**
 * The gateway: one HTTP server, `ws` in noServer mode on it, one Session per
 * WebSocket. Handlers are registered once, on the gateway, and serve every session.
 */
export class Gateway<C = unknown> {
  readonly httpServer: HttpServer;
  readonly logger: Logger;
  readonly registry = new MethodRegistry<Session<C>>();
  private readonly wss: WebSocketServer;
  private readonly path: string;
  private readonly limits: Required<GatewayLimits>;
  private readonly heartbeat: Heartbeat;
  private readonly liveSessions = new Map<string, Session<C>>();
  private readonly connectedSubject = new Subject<Session<C>>();
  private readonly disconnectedSubject = new Subject<Session<C>>();
  private readonly ownsServer: boolean;
  private readonly ownsBroker: boolean;
  /** Topics, streams and the subscribe/unsubscribe methods. */
  readonly pubsub: PubSubService<C>;
  private closing = false;
  /** This gateway's id among its peers: the prefix of its session ids. */
  readonly nodeId = nanoid(10);
  private readonly idPrefix = `${this.nodeId}-`;
  private readonly router: SessionRouter;
  /** Local sessions by user (GatewayOptions.userOf), for notifyUser. */
  private readonly sessionsByUser = new Map<string, Set<Session<C>>>();
  private sessionCounter = 0;
  private discovery: string | undefined;
  /** Reserved `rpc.` methods the gateway itself answers (shared by every session's peer). */
  private readonly reservedMethods = new Map<string, Handler<Session<C>>>();
  /** Peer settings every session shares (one object, one set of closures, for all of them). */
  private readonly peerConfig: PeerConfig<Session<C>>;
  private readonly admission: Admission;
  /** Proxies whose X-Forwarded-For is believed (GatewayOptions.trustedProxies); none by default. */
  private readonly proxies: TrustedProxies | undefined;
  /** POST /rpc: one ephemeral session per request. */
  private readonly httpRpc: HttpRpc<C>;
  /** The shared peer config, minus the close hook: HTTP exchanges are not connections. */
  private readonly httpPeerConfig: PeerConfig<Session<C>>;
  private readonly tcpServers = new Set<TcpServer>();
  /** Prometheus metrics, served at /metrics. */
  readonly metrics: GatewayMetrics;
  private closePromise: Promise<void> | undefined;

  /** Emits each session once it is open. */
  readonly connected$: Observable<Session<C>> = this.connectedSubject.asObservable();
  /** Emits each session once it has closed and all its calls have settled. */
  readonly disconnected$: Observable<Session<C>> = this.disconnectedSubject.asObservable();

  constructor(private readonly options: GatewayOptions<C> = {}) {
    this.logger = options.logger ?? createLogger();
    this.path = options.path ?? '/rpc';
    this.limits = { ...defaultLimits, ...options.limits };
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.limits.maxMessageBytes,
      clientTracking: false,
      perMessageDeflate: false,
      WebSocket: TransportSocket,
      handleProtocols: (offered, request) => this.pickProtocol(offered, request),
    });
    this.heartbeat = new Heartbeat(
      options.heartbeatInterval ?? 30_000,
      this.liveSessions,
      (transport) => {
        this.logger.info('terminating a connection that missed its pong');
        transport.socket.terminate();
      },
    );
    this.admission = new Admission(this.limits, options.allowedOrigins);
    this.proxies =
      options.trustedProxies && options.trustedProxies.length > 0
        ? new TrustedProxies(options.trustedProxies)
        : undefined;
    this.metrics = new GatewayMetrics({
      connections: () => this.liveSessions.size,
      subscriptionsByTopic: () => this.pubsub.topics(),
      // Labelled by declared topic (`room.*`), not by the names clients choose under it.
      subscriptionsByPattern: () => this.pubsub.subscriptionsByPattern(),
      dropped: () => this.pubsub.stats.dropped,
      slowConsumerDisconnects: () => this.pubsub.stats.slowConsumerDisconnects,
      isKnownMethod: (method) => this.registry.has(method),
    });
    const authorize = options.authorize;
    this.peerConfig = peerConfig({
      registry: this.registry,
      callTimeout: options.callTimeout,
      maxPendingCalls: this.limits.maxPendingCalls,
      maxInFlight: this.limits.maxInFlight,
      exposeErrorDetails: options.exposeErrorDetails,
      authorize: authorize && ((method, params, session) => authorize({ session, method, params })),
      onCallSettled: (method, outcome, ms) => this.metrics.callSettled(method, outcome, ms),
      reservedMethods: this.reservedMethods,
      parse: {
        acceptV1: options.acceptV1 ?? false,
        maxBatch: this.limits.maxBatch,
        maxDepth: this.limits.maxDepth,
      },
      onClosed: this.onSessionClosed,
    });
    this.httpPeerConfig = { ...this.peerConfig, onClosed: undefined };
    this.ownsBroker = !options.broker;
    this.pubsub = new PubSubService<C>(
      options.broker ?? new MemoryBroker(),
      { ...defaultSubscriptionMethods, ...options.subscriptionMethods },
      this.limits.maxSubscriptions,
      this.logger,
      options.exposeErrorDetails ?? false,
    );
    this.pubsub.install(this.registry);
    this.router = new SessionRouter(
      this.pubsub.broker,
      this.nodeId,
      {
        notifySession: (id, method, params) => {
          const session = this.liveSessions.get(id);
          if (!session || session.isClosed) return false;
          session.notify(method, params);
          return true;
        },
        notifyUser: (user, method, params) => {
          const sessions = [...(this.sessionsByUser.get(user) ?? [])];
          for (const session of sessions) if (!session.isClosed) session.notify(method, params);
          return sessions.length;
        },
      },
      this.logger,
    );
    this.ownsServer = !options.server;
    this.httpServer =
      options.server ?? (options.tls ? createHttpsServer(options.tls) : createServer());
    this.httpRpc = new HttpRpc<C>({
      admission: this.admission,
      authenticate: options.authenticate,
      limits: this.limits,
      logger: this.logger,
      proxies: this.proxies,
      isClosing: () => this.closing,
      newSession: (context, remoteAddress, transport, admit) =>
        this.newSession(transport, context, remoteAddress, admit, this.httpPeerConfig),
    });
    this.httpServer.on('request', (req, res) => void this.onHttpRequest(req, res));
    this.httpServer.on('upgrade', (req, socket: Duplex, head: Buffer) => {
      this.onUpgrade(req, socket, head).catch((err: unknown) => {
        // A hook (origin predicate, selectProtocol) threw: answer rather than leave the socket hanging.
        this.logger.error({ err }, 'upgrade failed');
        this.refuse(socket, 'error', 500);
      });
    });
  }

  /** Register a handler for calls from clients. `ctx.session` is the calling Session. */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<Session<C>, P, R>,
  ): () => void {
    return this.registry.method(descriptor, handler);
  }

  /** Declare a topic (exact name, or prefix ending in `*`) that clients may subscribe to. */
  topic(pattern: string, options?: TopicOptions<C>): void {
    this.checkHighWaterMark(pattern, options?.highWaterMark);
    this.pubsub.topic(pattern, options);
  }

  /** Declare a per-subscriber stream: `handler` returns an Observable for each subscriber. */
  stream<P, T>(name: string, handler: StreamHandler<C, P, T>, flow?: Partial<FlowControl>): void {
    this.checkHighWaterMark(name, flow?.highWaterMark);
    this.pubsub.stream(name, handler, flow);
  }

  /**
   * A slow-consumer high-water mark at or above half of `maxBufferedBytes` may never act, and
   * may keep a paused reader paused. Not an error (messages still flow), but worth saying once.
   */
  private checkHighWaterMark(name: string, highWaterMark: number | undefined): void {
    const { maxBufferedBytes } = this.limits;
    if (highWaterMark === undefined || maxBufferedBytes <= 0) return;
    // Reading resumes once the buffer is back at half of maxBufferedBytes; a busy topic keeps
    // it near its high-water mark, so that mark must sit below the half.
    if (highWaterMark < maxBufferedBytes / 2) return;
    this.logger.warn(
      { name, highWaterMark, maxBufferedBytes },
      'highWaterMark is not below half of limits.maxBufferedBytes: a paused reader may not resume, or the slow-consumer policy may never apply',
    );
  }

  /** Publish to every subscriber of `topic` (on every node sharing the broker). Resolves with the sequence number. */
  publish(topic: string, data: unknown): Promise<number> {
    return this.pubsub.publish(topic, data);
  }

  /** Publish every value of an Observable to `topic`. */
  publishFrom(topic: string, source: Observable<unknown>): Subscription {
    return this.pubsub.publishFrom(topic, source);
  }

  /** The broker topics live on. */
  get broker(): Broker {
    return this.pubsub.broker;
  }

  /**
   * Serve an OpenRPC document at `rpc.discover` and `GET /openrpc.json`
   * (`implementContract` does this with the contract's document).
   */
  serveDiscovery(document: unknown): void {
    this.discovery = JSON.stringify(document);
    this.reservedMethods.set(ReservedMethod.Discover, () => document);
  }

  /**
   * Notify a session by id, on whichever gateway it is connected (through the broker).
   * Resolves false when the session is not known here and its id names no other gateway.
   */
  notifySession(sessionId: string, method: string, params?: Params): Promise<boolean> {
    return this.router.notifySession(sessionId, method, params);
  }

  /** Notify every session of a user (GatewayOptions.userOf), on every gateway sharing the broker. */
  notifyUser(user: string, method: string, params?: Params): Promise<void> {
    return this.router.notifyUser(user, method, params);
  }

  /** Open sessions by id. */
  get sessions(): ReadonlyMap<string, Session<C>> {
    return this.liveSessions;
  }

  get isReady(): boolean {
    return this.readiness === 'ready';
  }

  /** What /readyz reports: ready, or why not. */
  get readiness(): Readiness {
    if (this.closing) return 'draining';
    if (!this.httpServer.listening) return 'not-listening';
    // A gateway whose broker is down cannot publish: the load balancer should send clients elsewhere.
    if (!this.pubsub.broker.ready) return 'broker-unavailable';
    return 'ready';
  }

  /** New long-lived connections are refused while the broker is down (refuseWhileBrokerDown). */
  private get refusingForBroker(): boolean {
    return (this.options.refuseWhileBrokerDown ?? true) && !this.pubsub.broker.ready;
  }

  /** Start listening (only when the gateway created its own HTTP server). */
  async listen(port = 8080, host = '127.0.0.1'): Promise<AddressInfo> {
    await this.router.start();
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.httpServer.once('error', onError);
      this.httpServer.listen(port, host, () => {
        this.httpServer.off('error', onError);
        const address = this.httpServer.address() as AddressInfo;
        this.logger.info(
          { host: address.address, port: address.port, path: this.path },
          'gateway listening',
        );
        resolve(address);
      });
    });
  }

  /**
   * Serve the same methods over TCP, one JSON-RPC message per line (newline-delimited JSON),
   * in both directions, subscriptions included; with the `tls` option, over TLS. Connections
   * go through the same admission (limits per address) and `authenticate` hook, called with
   * `transport: 'tcp'` and no headers. Resolves once listening.
   */
  async listenTcp(port = 0, host = '127.0.0.1'): Promise<AddressInfo> {
    const onSocket = (socket: Socket): void => {
      socket.on('error', () => socket.destroy());
      // Writes are already gathered per turn: no Nagle delay on top. TCP has no ping frame,
      // so the kernel's keepalive finds peers that vanished without a FIN.
      socket.setNoDelay(true);
      socket.setKeepAlive(true, this.options.heartbeatInterval || 30_000);
      void this.acceptStream(socket, socket, 'tcp', socket.remoteAddress);
    };
    const tls = this.options.tls;
    // Half-open allowed: a client may end its side after its requests and still get the replies.
    const server = tls
      ? createTlsServer({ ...tls, allowHalfOpen: true }, onSocket)
      : createTcpServer({ allowHalfOpen: true }, onSocket);
    this.tcpServers.add(server);
    server.on('close', () => this.tcpServers.delete(server));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        const address = server.address() as AddressInfo;
        this.logger.info(
          { host: address.address, port: address.port, tls: !!tls },
          'tcp listening',
        );
        resolve(address);
      });
    });
  }

  /**
   * Serve one connection over a pair of streams, newline-delimited JSON: a process's own
   * stdin and stdout (`gateway.serveStream(process.stdin, process.stdout)`, the way language
   * servers and MCP servers talk; log to stderr then), or a child's. `authenticate` is called
   * with `transport: 'stdio'`. Resolves with the session, or rejects if it was refused.
   */
  async serveStream(
    input: Readable,
    output: Writable,
    kind: 'stdio' | 'tcp' = 'stdio',
  ): Promise<Session<C>> {
    const session = await this.acceptStream(input, output, kind, undefined);
    if (!session) throw new Error('the stream connection was refused (see the log)');
    return session;
  }

  private async acceptStream(
    input: Readable,
    output: Writable,
    kind: 'stdio' | 'tcp',
    remoteAddress: string | undefined,
  ): Promise<Session<C> | undefined> {
    const refuse = (status: number, message: string): undefined => {
      this.logger.info({ transport: kind, remoteAddress, status, message }, 'connection refused');
      input.resume(); // whatever else it sends is thrown away
      // The line, then the end; a socket whose peer keeps its side open is destroyed soon after.
      output.end(streamRefusal(status, message), () => {
        if (kind === 'tcp') setTimeout(() => input.destroy(), 1_000).unref();
      });
      return undefined;
    };
    if (this.closing) return refuse(503, 'Server shutting down');
    // A pipe (stdio) is the process's one connection: it is served, broker or not.
    if (kind === 'tcp' && this.refusingForBroker) return refuse(503, 'Broker unavailable');
    const request = describeStream(kind, remoteAddress);
    const admitted = this.admission.admit(request);
    if (typeof admitted !== 'function') return refuse(admitted.status, admitted.message);
    const auth = await runAuthenticate(this.options.authenticate, request, this.logger);
    if (!auth.ok) {
      admitted();
      return refuse(auth.status, auth.message ?? 'Internal server error');
    }
    const context = auth.context;
    const held = await this.holdUser(context);
    if (!held.ok) {
      admitted();
      return refuse(500, 'Internal server error');
    }
    const { user } = held;
    try {
      if (this.closing || input.destroyed) {
        admitted();
        return this.closing ? refuse(503, 'Server shutting down') : undefined;
      }
      const transport = new NdjsonTransport(input, output, {
        kind,
        maxLineBytes: this.limits.maxMessageBytes,
        maxBufferedBytes: this.limits.maxBufferedBytes,
        counters: this.metrics,
        // `echo request | server` or a half-closed socket: answer what came, then close.
        onInputEnd: () =>
          void this.closeWhenIdle(session, Date.now() + 30_000, CloseCode.Normal, 'input ended'),
      });
      const session = this.attach(transport, context, remoteAddress, user);
      session.logger.info({ transport: kind, remoteAddress }, 'connected');
      return session;
    } finally {
      this.releaseUser(user);
    }
  }

  /**
   * Before a session of a user (`userOf`) opens: start listening for the user's messages on
   * this node and wait until the broker has that subscription (or the attempt failed; it is
   * retried), so a `notifyUser` sent after the session's first answer reaches it. The hold is
   * released with `releaseUser` once the session took its own (in `attach`), or was refused.
   */
  private async holdUser(
    context: C,
  ): Promise<{ ok: true; user: string | undefined } | { ok: false }> {
    let user: string | undefined;
    try {
      user = this.options.userOf?.(context);
    } catch (err) {
      // A failing hook refuses the connection (500), as a failing authenticate does.
      this.logger.error({ err }, 'userOf failed');
      return { ok: false };
    }
    if (user === undefined) return { ok: true, user };
    this.router.userConnected(user);
    await this.router.listeningFor(user);
    return { ok: true, user };
  }

  private releaseUser(user: string | undefined): void {
    if (user !== undefined) this.router.userDisconnected(user);
  }

  /**
   * Graceful drain (what SIGTERM should do): readiness turns 503, new upgrades
   * are refused, every client gets an `rpc.reconnect` notice, calls arriving
   * after it are answered -32006, and each session is closed with 1012 once its
   * in-flight calls have finished (or the deadline passed). Then the gateway closes as `close()` does, broker included.
   */
  async drain(options: DrainOptions = {}): Promise<void> {
    if (this.closePromise) return this.closePromise;
    this.closing = true;
    const deadline = Date.now() + (options.deadlineMs ?? 10_000);
    const notice = options.reconnectUrl ? { url: options.reconnectUrl } : {};
    const sessions = [...this.liveSessions.values()];
    this.logger.info({ sessions: sessions.length }, 'draining');
    for (const session of sessions) {
      if (session.isClosed) continue;
      session.peer.stopAcceptingCalls();
      session.notify(ReservedMethod.Reconnect, notice);
    }
    await Promise.all([
      ...sessions.map((session) => this.closeWhenIdle(session, deadline)),
      this.httpRpc.settled(deadline - Date.now()),
    ]);
    return this.close({ code: CloseCode.ServiceRestart, reason: 'service restart' });
  }

  private async closeWhenIdle(
    session: Session<C>,
    deadline: number,
    code: number = CloseCode.ServiceRestart,
    reason = 'service restart',
  ): Promise<void> {
    // Polling is enough here: it runs once per session close, for at most the deadline.
    while (!session.isClosed && session.peer.inFlightCount > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    session.close(code, reason);
  }

  /**
   * Stop: refuse new connections, close every session with `code`, wait for
   * them (up to `timeoutMs`, then cut them off), and close the HTTP server.
   */
  close(options: CloseOptions = {}): Promise<void> {
    // Every caller, first or later, waits for the same complete shutdown.
    this.closePromise ??= this.shutdown(options);
    return this.closePromise;
  }

  private async shutdown(options: CloseOptions): Promise<void> {
    this.closing = true;
    const code = options.code ?? CloseCode.GoingAway;
    for (const server of this.tcpServers) server.close();
    const sessions = [...this.liveSessions.values()];
    // WebSockets finish their closing handshake; waiting for it lets clients see the code.
    const sockets = sessions
      .map((session) => session.transport)
      .filter((transport) => transport instanceof WsTransport)
      .map((transport) => transport.socket);
    for (const session of sessions) session.close(code, options.reason ?? 'server shutting down');
    await this.waitForSockets(sockets, options.timeoutMs ?? 5_000);
    this.heartbeat.stop();
    this.wss.close();
    this.connectedSubject.complete();
    this.disconnectedSubject.complete();
    // HTTP requests already taken finish (their handlers may still publish) before the
    // server and the broker go; new ones have been answered 503 since `closing` was set.
    await this.httpRpc.settled(options.timeoutMs ?? 5_000);
    this.httpRpc.closeAll();
    if (this.ownsServer && this.httpServer.listening) {
      await new Promise<void>((resolve) => {
        this.httpServer.close(() => resolve());
        this.httpServer.closeAllConnections();
      });
    }
    await this.router.stop();
    if (this.ownsBroker) await this.pubsub.broker.close();
    this.logger.info('gateway closed');
  }

  private async waitForSockets(sockets: WebSocket[], timeoutMs: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    const allClosed = Promise.all(
      sockets.map((socket) => {
        if (socket.readyState === socket.CLOSED) return Promise.resolve();
        return new Promise<void>((resolve) => socket.once('close', () => resolve()));
      }),
    );
    await Promise.race([allClosed, deadline]);
    clearTimeout(timer);
    for (const socket of sockets) if (socket.readyState !== socket.CLOSED) socket.terminate();
  }

  private pickProtocol(offered: Set<string>, request: IncomingMessage): string | false {
    const list = [...offered];
    if (this.options.selectProtocol)
      return this.options.selectProtocol(list, describeUpgrade(request, 'websocket', this.proxies));
    // Never echo a token a browser sent as a subprotocol when a real protocol name is there.
    return offered.has(PREFERRED_SUBPROTOCOL) ? PREFERRED_SUBPROTOCOL : (list[0] ?? false);
  }

  private async onHttpRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (serveHealth(req, res, { status: this.readiness, sessions: this.liveSessions.size }))
        return;
      const path = (req.url ?? '/').split('?', 1)[0];
      if (path === '/openrpc.json' && this.discovery !== undefined) {
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'access-control-allow-origin': '*',
        });
        res.end(this.discovery);
        return;
      }
      if (path === '/metrics' && this.options.metrics !== false) {
        const text = await this.metrics.render();
        res.writeHead(200, {
          'content-type': this.metrics.contentType,
          'cache-control': 'no-store',
        });
        res.end(text);
        return;
      }
      if (path === this.path) {
        if (req.method === 'POST') return await this.httpRpc.handle(req, res);
        if (req.method === 'OPTIONS') return this.httpRpc.preflight(req, res);
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          res.setHeader('allow', 'GET, POST, OPTIONS');
          sendText(
            res,
            405,
            'Use POST for JSON-RPC over HTTP, or GET with an Upgrade for WebSocket.\n',
          );
          return;
        }
        res.setHeader('upgrade', 'websocket');
        sendText(
          res,
          426,
          'This endpoint speaks JSON-RPC over WebSocket (send an Upgrade request) or over HTTP POST.\n',
        );
        return;
      }
      if (this.options.httpHandler && (await this.options.httpHandler(req, res))) return;
      sendText(res, 404, 'Not found\n');
    } catch (err) {
      this.logger.error({ err }, 'http handler failed');
      if (!res.headersSent) sendText(res, 500, 'Internal server error\n');
      else res.destroy();
    }
  }

  private async onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', destroySocket);
    const path = (request.url ?? '/').split('?', 1)[0];
    if (path !== this.path) return this.refuse(socket, 'path', 404);
    if (this.closing)
      return this.refuse(socket, 'draining', 503, 'Server shutting down', { 'Retry-After': '1' });
    const upgrade = describeUpgrade(request, 'websocket', this.proxies);
    if (this.refusingForBroker) {
      // Sessions already open stay; new ones go to a node whose broker works.
      return this.refuse(
        socket,
        'broker-unavailable',
        503,
        'Broker unavailable',
        { 'Retry-After': '5' },
        upgrade,
      );
    }
    const admitted = this.admission.admit(upgrade);
    if (typeof admitted !== 'function') {
      return this.refuse(
        socket,
        admitted.reason,
        admitted.status,
        admitted.message,
        admitted.headers,
        upgrade,
      );
    }
    const release = admitted;
    const auth = await runAuthenticate(this.options.authenticate, upgrade, this.logger);
    if (!auth.ok) {
      release();
      const { reason, status, message, headers } = auth;
      // A failed hook is logged by runAuthenticate; a refusal is logged with its request.
      const logged = reason === 'unauthenticated' ? upgrade : undefined;
      return this.refuse(socket, reason, status, message, headers, logged);
    }
    const context = auth.context;
    const held = await this.holdUser(context);
    if (!held.ok) {
      release();
      return this.refuse(socket, 'auth-error', 500);
    }
    const { user } = held;
    try {
      if (this.closing) {
        release();
        return this.refuse(socket, 'draining', 503, 'Server shutting down');
      }
      if (socket.destroyed) return release();
      const { remoteAddress } = upgrade;
      let opened = false;
      try {
        this.wss.handleUpgrade(request, socket, head, (ws) => {
          opened = true;
          socket.removeListener('error', destroySocket); // ws has its own from here
          // The server's `WebSocket` option makes every socket a TransportSocket.
          this.openSession(ws as TransportSocket, context, remoteAddress, user);
        });
      } finally {
        // ws calls back synchronously or not at all (it refused or destroyed the socket, or a
        // hook such as selectProtocol threw). Once open, the session frees the slot when it
        // closes (onSessionClosed): no listener per connection.
        if (!opened) release();
      }
    } finally {
      this.releaseUser(user);
    }
  }

  private refuse(
    socket: Duplex,
    reason: string,
    status: number,
    message?: string,
    headers?: Record<string, string>,
    upgrade?: UpgradeRequest,
  ): void {
    this.metrics.upgradeRejected(reason);
    if (upgrade)
      this.logger.info(
        { status, reason, remoteAddress: upgrade.remoteAddress },
        'upgrade rejected',
      );
    rejectUpgrade(socket, status, message, headers);
  }

  private openSession(
    ws: TransportSocket,
    context: C,
    remoteAddress: string | undefined,
    user: string | undefined,
  ): void {
    const transport = new WsTransport(ws, this.metrics, undefined, this.limits.maxBufferedBytes);
    const session = this.attach(transport, context, remoteAddress, user);
    session.logger.info(
      // A subprotocol other than ours may be a token (a browser's only way to send one).
      { remoteAddress, protocol: ws.protocol === PREFERRED_SUBPROTOCOL ? ws.protocol : undefined },
      'connected',
    );
  }

  /** A session and its peer over `transport`. Everything but these, the logger and the bucket is shared. */
  private newSession(
    transport: ServerTransport,
    context: C,
    remoteAddress: string | undefined,
    admit: { take(): boolean } | undefined,
    config: PeerConfig<Session<C>>,
  ): Session<C> {
    // Unique across gateways (a random prefix per process) without a random draw per connection.
    const id = `${this.idPrefix}${(++this.sessionCounter).toString(36)}`;
    const logger = new LazyChildLogger(this.logger, 'session', id);
    const session = new Session<C>(id, context, remoteAddress, logger, transport);
    // An HTTP exchange answers in its response (AnsweringPeer.answer); connections send.
    const PeerClass = transport.canPush ? Peer : AnsweringPeer;
    session.peer = new PeerClass<Session<C>>(transport, { session, logger, admit }, config);
    return session;
  }

  /** Open a session (a connection the gateway keeps) over an admitted transport of any kind. */
  private attach(
    transport: ServerTransport,
    context: C,
    remoteAddress: string | undefined,
    /** `userOf(context)`, worked out once by the caller (holdUser). */
    user: string | undefined,
  ): Session<C> {
    const { ratePerSecond, rateBurst } = this.limits;
    const bucket = ratePerSecond > 0 ? new TokenBucket(ratePerSecond, rateBurst) : undefined;
    const session = this.newSession(transport, context, remoteAddress, bucket, this.peerConfig);
    this.liveSessions.set(session.id, session);
    if (user !== undefined) {
      session.user = user;
      let sessions = this.sessionsByUser.get(user);
      if (!sessions) this.sessionsByUser.set(user, (sessions = new Set()));
      sessions.add(session);
      this.router.userConnected(user);
    }
    this.connectedSubject.next(session);
    return session;
  }

  private readonly onSessionClosed = (peer: Peer<Session<C>>, info: CloseInfo): void => {
    const session = peer.session;
    this.liveSessions.delete(session.id);
    this.admission.release(session.transport.kind, session.remoteAddress);
    this.pubsub.detach(session);
    if (session.user !== undefined) {
      const sessions = this.sessionsByUser.get(session.user);
      sessions?.delete(session);
      if (sessions?.size === 0) this.sessionsByUser.delete(session.user);
      this.router.userDisconnected(session.user);
    }
    session.logger.info({ code: info.code, reason: info.reason || undefined }, 'disconnected');
    this.disconnectedSubject.next(session);
  };
}

// Shared by every upgrading socket (`this` is the socket): no closure per connection.
function destroySocket(this: Duplex): void {
  this.destroy();
}

/** Create a gateway; call `listen()` to start it. */
export function createGateway<C = unknown>(options: GatewayOptions<C> = {}): Gateway<C> {
  return new Gateway<C>(options);
}
