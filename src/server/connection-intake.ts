import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Server as TcpServer, Socket } from 'node:net';
import type { Duplex, Readable, Writable } from 'node:stream';
import { Server as TlsServer, createServer as createTlsServer } from 'node:tls';
import { WebSocketServer } from 'ws';
import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import { NdjsonTransport } from '../transport/ndjson-transport.js';
import { CloseCode } from '../transport/transport.js';
import type { ServerTransport } from '../transport/transport.js';
import { TransportSocket, WsTransport } from '../transport/ws-transport.js';
import type { InputLimit } from '../transport/ws-transport.js';
import { RateLimit, TokenBucket } from './token-bucket.js';
import { AddressInputLimits, unboundedLimit } from './address-budgets.js';
import { addressGroupOf } from './address-group.js';
import { ENCODING_NAMES, subprotocolOf } from '../encoding/codec.js';
import type { WireCodec } from '../encoding/codec.js';
import { loadCodecs } from '../encoding/load-codecs.js';
import { SharedDeflate } from '../transport/deflate-frames.js';
import { wsDeflateOptions } from './deflate-options.js';
import { registerDeflateMetrics } from './deflate-metrics.js';
import type { Admission, SocketGate } from './admission.js';
import type { TrustedProxies } from './client-address.js';
import type { GatewayMetrics } from './metrics.js';
import { gatewayDefaults } from './gateway-config.js';
import { PREFERRED_SUBPROTOCOL } from './options.js';
import type { GatewayConfig } from './gateway-config.js';
import type { GatewayLimits, UpgradeRequest } from './options.js';
import { revocationMark, revokedSince } from './revocation.js';
import { releaseAdmission, runAuthenticate } from './run-authenticate.js';
import type { AuthenticateOutcome } from './run-authenticate.js';
import type { Session } from './session.js';
import type { SessionRouter } from './session-router.js';
import { closeWhenIdle } from './shutdown.js';
import { streamRefusal } from './stream-refusal.js';
import { rejectUpgrade, sendableRefusal } from './upgrade-rejection.js';
import type { RefusalLog } from './upgrade-rejection.js';
import { describeStream, describeUpgrade, handshakeFault } from './upgrade-request.js';
import { pathOf } from './http-dispatch.js';

/** The subprotocols of every encoding a gateway can enable, on or off. */
const ALL_ENCODING_PROTOCOLS: ReadonlySet<string> = new Set(ENCODING_NAMES.map(subprotocolOf));

/** What `identify` found: the session's identity, or which hook refused or failed. */
type Identified<C> =
  | { ok: true; context: C; user: string | undefined; pending: boolean }
  | (Extract<AuthenticateOutcome<C>, { ok: false }> & { hook: 'authenticate' })
  | { ok: false; hook: 'userOf' };

export interface IntakeDeps<C> {
  /** Read when used (authenticate, userOf, selectProtocol, refuseWhileBrokerDown, tls, ...). */
  config: GatewayConfig<C>;
  /** The WebSocket endpoint's path. */
  path: string;
  limits: Required<GatewayLimits>;
  logger: Logger;
  metrics: GatewayMetrics;
  admission: Admission;
  /**
   * The socket bounds of the HTTP port (when it has them: on a server the gateway did not
   * create, only those the application set) and of the TLS TCP listener: a socket that became
   * a WebSocket session or carries an event stream, or finished its TLS handshake, leaves them.
   */
  sockets?: Pick<SocketGate, 'handedOver' | 'watchTlsListener'> | undefined;
  /** Where refusals are logged, without letting a flood of them flood the log. */
  refusals: Pick<RefusalLog, 'refused' | 'flush'>;
  proxies: TrustedProxies | undefined;
  broker: Broker;
  router: Pick<SessionRouter, 'holdUser' | 'userDisconnected' | 'pending'>;
  isClosing(): boolean;
  /** The authenticate hook as the gateway composed it (the one every phase runs). */
  authenticate: GatewayConfig<C>['auth']['authenticate'];
  /**
   * Open a session over an admitted transport; `user` is `userOf(context)`, worked out here.
   * `pending`: accepted without credentials, to authenticate in-band (`identity.inBand`).
   */
  attach(
    transport: ServerTransport,
    context: C,
    remoteAddress: string | undefined,
    user: string | undefined,
    request: UpgradeRequest,
    pending: boolean,
  ): Session<C>;
}

/**
 * Node keeps the peer's address on a socket once it was read (`_peername`: an object of address,
 * family and port); the session holds the address string it needs, so the socket need not keep
 * the object as long as it is open. Read again, it is asked of the socket anew.
 */
function forgetPeerAddress(ws: TransportSocket): void {
  const raw = (ws as unknown as { _socket?: { _peername?: unknown } })._socket;
  if (raw?._peername !== undefined) raw._peername = undefined;
}

/** What WsTransport.setEncoding takes. */
type WsEncodingOf = Parameters<WsTransport['setEncoding']>[0];
/**
 * Connection intake: every long-lived connection (a WebSocket upgrade, a TCP socket, a pair of
 * stdio streams) passes the same gates in the same order before a session opens: closing,
 * broker, admission (limits per address), `authenticate`, `userOf`. It exists so those gates
 * and their refusals (an HTTP status for an upgrade, one JSON line for a stream) live in one
 * place, apart from what the gateway does with a session once it is open.
 */
/**
 * limits.bytesPerSecond as WsTransport takes it: a token bucket of bytes per connection, holding
 * two messages of the largest size, so a lone one always passes. Undefined when off (0).
 */
function inputLimitOf(limits: Required<GatewayLimits>): InputLimit | undefined {
  const { bytesPerSecond, maxMessageBytes } = limits;
  if (bytesPerSecond <= 0) return undefined;
  const limit = new RateLimit(bytesPerSecond, 2 * maxMessageBytes);
  return { budget: () => new TokenBucket(limit) };
}

/**
 * limits.bytesPerSecondPerIp: a byte bucket per address group with WebSocket connections, of
 * the same size as a connection's (two messages of the largest size), which each connection's
 * bytes are counted against as well as against its own. At most one entry per connection
 * allowed (maxConnections). Undefined when off (0).
 */
function addressInputsOf(limits: Required<GatewayLimits>): AddressInputLimits | undefined {
  const { bytesPerSecond, bytesPerSecondPerIp, maxMessageBytes, maxConnections } = limits;
  if (bytesPerSecondPerIp <= 0) return undefined;
  const burst = 2 * maxMessageBytes;
  const own = bytesPerSecond > 0 ? new RateLimit(bytesPerSecond, burst) : unboundedLimit();
  return new AddressInputLimits(own, new RateLimit(bytesPerSecondPerIp, burst), maxConnections);
}

/**
 * Retry-After of a refusal while the gateway drains or closes, as POST /rpc's: a load balancer
 * or client tries another node soon.
 */
const DRAINING_RETRY_AFTER: Readonly<Record<string, string>> = { 'Retry-After': '1' };

/** Retry-After of a refusal while the broker is down (refuseWhileBrokerDown). */
const BROKER_DOWN_RETRY_AFTER: Readonly<Record<string, string>> = { 'Retry-After': '5' };

/** A stream's error listener where nothing is to be done but not crash (acceptStream). */
const ignoreError = (): void => undefined;

export class ConnectionIntake<C> {
  private readonly wss: WebSocketServer;
  private readonly tcpServers = new Set<TcpServer>();
  /**
   * The binary codecs of `encodings`, imported on construction (their packages are optional);
   * an upgrade waits for them, and fails (500, logged with the missing package) without them.
   */
  readonly codecsLoaded: Promise<ReadonlyMap<string, WireCodec>>;
  private codecs: ReadonlyMap<string, WireCodec> = new Map();
  /** The subprotocols of the encodings on, for the default protocol choice. */
  private readonly encodingProtocols: ReadonlySet<string>;
  /** Compresses each broadcast once for every socket that negotiated permessage-deflate. */
  private readonly deflate: SharedDeflate | undefined;
  /** The encoding of every JSON connection: one object for all of them (each transport keeps it). */
  private readonly jsonEncoding: WsEncodingOf;
  /** The bytes a WebSocket connection may read (limits.bytesPerSecond); undefined when off. */
  private readonly inputLimit: InputLimit | undefined;
  /**
   * The bytes the WebSocket connections of an address group may read together
   * (limits.bytesPerSecondPerIp); undefined when off.
   */
  private readonly addressInputs: AddressInputLimits | undefined;

  constructor(private readonly deps: IntakeDeps<C>) {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: deps.limits.maxMessageBytes,
      clientTracking: false,
      perMessageDeflate: wsDeflateOptions(deps.config.http.perMessageDeflate),
      WebSocket: TransportSocket,
      // TransportSocket answers pings itself (without a closure per socket).
      autoPong: false,
      handleProtocols: (offered, request) => this.pickProtocol(offered, request),
    });
    // A refusal ws makes itself (one handshakeFault does not foresee: an extension offer ws
    // cannot parse or accept) is answered here, so that it is counted and logged as any other.
    this.wss.on('wsClientError', (err: Error, socket: Duplex, request: IncomingMessage) => {
      const fault = handshakeFault(request);
      const upgrade = describeUpgrade(request, 'websocket', deps.proxies);
      this.refuse(
        socket,
        'bad-handshake',
        fault?.status ?? 400,
        fault?.message ?? err.message,
        fault?.headers,
        upgrade,
      );
    });
    this.inputLimit = inputLimitOf(deps.limits);
    this.addressInputs = addressInputsOf(deps.limits);
    const { encodings } = deps.config.http;
    this.jsonEncoding = { binaryFrames: deps.config.http.binaryJsonFrames };
    this.encodingProtocols = new Set(encodings.map(subprotocolOf));
    this.codecsLoaded = loadCodecs(encodings, deps.limits.maxJsonValues);
    this.codecsLoaded.then(
      (codecs) => (this.codecs = codecs),
      () => undefined, // reported where awaited: Gateway.listen, each upgrade
    );
    const deflate = deps.config.http.perMessageDeflate;
    if (deflate) {
      this.deflate = new SharedDeflate(deflate);
      registerDeflateMetrics(deps.metrics.registry, this.deflate.counters);
    }
  }

  /** The HTTP server's `upgrade` listener. */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.onUpgrade(request, socket, head).catch((err: unknown) => {
      // A hook (origin predicate, selectProtocol) threw: answer rather than leave the socket hanging.
      this.deps.logger.error({ err }, 'upgrade failed');
      this.refuse(socket, 'error', 500);
    });
  }

  /**
   * An upgrade for a path no listener of the server takes (on the gateway's own server, any
   * path but its own): 404.
   */
  refusePath(socket: Duplex): void {
    socket.on('error', destroySocket);
    this.refuse(socket, 'path', 404);
  }

  /** Gateway.listenTcp: a TCP (or, with the `tls` option, TLS) listener whose sockets come here. */
  listenTcp(port: number, host: string): Promise<AddressInfo> {
    const onSocket = (socket: Socket): void => {
      socket.on('error', () => socket.destroy());
      // Writes are already gathered per turn: no Nagle delay on top. TCP has no ping frame,
      // so the kernel's keepalive finds peers that vanished without a FIN.
      socket.setNoDelay(true);
      const { heartbeatIntervalMs } = this.deps.config.timing;
      // With the heartbeat off, the kernel still probes, at the default interval.
      socket.setKeepAlive(true, heartbeatIntervalMs || gatewayDefaults.heartbeatIntervalMs);
      void this.acceptStream(socket, socket, 'tcp', socket.remoteAddress);
    };
    const tls = this.deps.config.http.tls;
    // Half-open allowed: a client may end its side after its requests and still get the replies.
    const server = tls
      ? createTlsServer({ ...tls, allowHalfOpen: true }, onSocket)
      : createTcpServer({ allowHalfOpen: true }, onSocket);
    // A TLS handshake is bounded as an HTTP request's headers are (a plain TCP socket is
    // admitted, by address, at once).
    if (server instanceof TlsServer) this.deps.sockets?.watchTlsListener(server);
    this.tcpServers.add(server);
    server.on('close', () => this.tcpServers.delete(server));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        // As the HTTP server's (Gateway.listen): a listening server's error is logged, not fatal.
        server.on('error', (err: Error) => this.deps.logger.error({ err }, 'tcp server error'));
        const address = server.address() as AddressInfo;
        this.deps.logger.info(
          { host: address.address, port: address.port, tls: !!tls },
          'tcp listening',
        );
        resolve(address);
      });
    });
  }

  /** Shutdown, first: no new TCP connections. */
  closeTcpListeners(): void {
    for (const server of this.tcpServers) server.close();
  }

  /** Shutdown, once the sessions are closed. */
  closeWebSocketServer(): void {
    this.wss.close();
    this.deps.refusals.flush();
  }

  /**
   * New long-lived connections are refused while the broker is down (refuseWhileBrokerDown), or
   * has not yet taken the node's own subscriptions (what other nodes send its sessions), as
   * /readyz says `broker-unavailable` then.
   */
  private get refusingForBroker(): boolean {
    const { config, broker, router } = this.deps;
    return config.pubsub.refuseWhileBrokerDown && (!broker.ready || router.pending);
  }

  private pickProtocol(offered: Set<string>, request: IncomingMessage): string | false {
    const list = [...offered];
    const { config, proxies } = this.deps;
    const { selectProtocol } = config.http;
    if (selectProtocol) return selectProtocol(list, describeUpgrade(request, 'websocket', proxies));
    // The client's first choice among the encodings on. Never echo a token a browser sent as a
    // subprotocol when a real protocol name is there, nor an encoding that is off: the
    // connection would speak JSON to a client sending binary frames. With none left, no
    // subprotocol: the client fails the handshake.
    return (
      list.find((p) => this.encodingProtocols.has(p)) ??
      list.find((p) => !ALL_ENCODING_PROTOCOLS.has(p)) ??
      false
    );
  }

  private async onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const { deps } = this;
    socket.on('error', destroySocket);
    // The server's hub brings only upgrades for this path; kept as the check it depends on.
    const path = pathOf(request.url);
    if (path !== deps.path) return this.refuse(socket, 'path', 404);
    // What ws would refuse is refused before it takes a connection slot or an authenticate call.
    const fault = handshakeFault(request);
    if (fault) {
      const { status, message, headers } = fault;
      const upgrade = describeUpgrade(request, 'websocket', deps.proxies);
      return this.refuse(socket, 'bad-handshake', status, message, headers, upgrade);
    }
    if (deps.isClosing()) {
      return this.refuse(socket, 'draining', 503, 'Server shutting down', DRAINING_RETRY_AFTER);
    }
    const upgrade = describeUpgrade(request, 'websocket', deps.proxies);
    if (this.refusingForBroker) {
      // Sessions already open stay; new ones go to a node whose broker works.
      return this.refuse(
        socket,
        'broker-unavailable',
        503,
        'Broker unavailable',
        BROKER_DOWN_RETRY_AFTER,
        upgrade,
      );
    }
    const admitted = deps.admission.admit(upgrade);
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
    // The slot is released on every way out (refused, the client gone during a hook, a hook or
    // ws throwing) except one: a session opened, which frees it when it closes
    // (SessionTable.onClosed), with no listener per connection.
    let kept = false;
    try {
      kept = await this.completeUpgrade(request, socket, head, upgrade);
    } finally {
      if (!kept) this.release(admitted, upgrade);
    }
  }

  /** After admission: the hooks, then the handshake. Whether a session opened (and took the slot). */
  private async completeUpgrade(
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    upgrade: UpgradeRequest,
  ): Promise<boolean> {
    const { deps } = this;
    await this.codecsLoaded; // pickProtocol and openSession read them
    const identified = await this.identify(upgrade);
    if (!identified.ok) {
      if (identified.hook === 'userOf') {
        this.refuse(socket, 'auth-error', 500);
        return false;
      }
      const { reason, status, message, headers } = identified;
      // A failed hook is logged by runAuthenticate; a refusal is logged with its request.
      const logged = reason === 'unauthenticated' ? upgrade : undefined;
      this.refuse(socket, reason, status, message, headers, logged);
      return false;
    }
    const { context, user, pending } = identified;
    try {
      if (deps.isClosing()) {
        this.refuse(socket, 'draining', 503, 'Server shutting down', DRAINING_RETRY_AFTER);
        return false;
      }
      // The client left while the hooks ran.
      if (socket.destroyed) return false;
      // From here to the session's opening (ws calls back synchronously) nothing waits.
      const tooMany = deps.admission.admitUser(user);
      if (tooMany) {
        const { reason, status, message, headers } = tooMany;
        this.refuse(socket, reason, status, message, headers, upgrade);
        return false;
      }
      let opened = false;
      // ws calls back synchronously or not at all (it refused or destroyed the socket, or a
      // hook such as selectProtocol threw).
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        socket.removeListener('error', destroySocket); // ws has its own from here
        deps.sockets?.handedOver(socket);
        try {
          // The server's `WebSocket` option makes every socket a TransportSocket.
          this.openSession(ws as TransportSocket, context, upgrade, user, pending);
        } catch (err) {
          ws.terminate();
          throw err;
        }
        opened = true;
      });
      return opened;
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
    this.deps.metrics.upgradeRejected(reason);
    if (upgrade) {
      // A client can cause these at will: the first of an interval at info, the rest counted.
      this.deps.refusals.refused(
        { status, reason, remoteAddress: upgrade.remoteAddress },
        'upgrade rejected',
      );
    }
    rejectUpgrade(socket, status, message, headers, this.deps.logger);
  }

  /**
   * Whether a connection is accepted unauthenticated, to authenticate in-band: with
   * `identity.inBand`, when it carries no token (`identity.carriesToken`, by default a Bearer one).
   */
  private inBand(request: UpgradeRequest): boolean {
    const { inBand, carriesToken } = this.deps.config.identity;
    if (!inBand) return false;
    return carriesToken ? !carriesToken(request) : request.token === undefined;
  }

  private openSession(
    ws: TransportSocket,
    context: C,
    upgrade: UpgradeRequest,
    user: string | undefined,
    pending: boolean,
  ): void {
    const { metrics, limits } = this.deps;
    const { remoteAddress } = upgrade;
    const transport = new WsTransport(
      ws,
      metrics.countersFor('websocket'),
      undefined,
      limits.maxBufferedBytes,
      this.deflate,
      this.inputLimitFor(remoteAddress),
      limits.messageCostBytes,
    );
    const codec = this.codecs.get(ws.protocol);
    transport.setEncoding(codec ? { codec, maxDepth: limits.maxDepth } : this.jsonEncoding);
    const session = this.deps.attach(transport, context, remoteAddress, user, upgrade, pending);
    forgetPeerAddress(ws);
    // A subprotocol other than ours may be a token (a browser's only way to send one).
    const protocol = ws.protocol === PREFERRED_SUBPROTOCOL || codec ? ws.protocol : undefined;
    session.logger.info({ remoteAddress, protocol }, 'connected');
  }

  /**
   * The input limit of a WebSocket (or TCP) connection from `remoteAddress`: its address group's,
   * which it holds until it closes (its transport releases it), or its own alone when the
   * per-address budget is off or can keep no entry for the group.
   */
  private inputLimitFor(
    remoteAddress: string | undefined,
    kind: 'websocket' | 'tcp' = 'websocket',
  ): InputLimit | undefined {
    const addressInputs = this.addressInputs;
    if (addressInputs === undefined) return this.inputLimit;
    return addressInputs.acquire(addressGroupOf(kind, remoteAddress)!) ?? this.inputLimit;
  }

  /**
   * An HTTP streaming session's first GET (the fallback for clients without WebSocket): the
   * gates of an upgrade (closing, broker, admission, `authenticate`, `userOf`), refusals
   * answered with their HTTP status; then a session over the transport `open` makes, which
   * takes `res` as its stream.
   */
  async acceptEventStream(
    req: IncomingMessage,
    res: ServerResponse,
    open: () => ServerTransport & { attach(res: ServerResponse, lastEventId: undefined): boolean },
  ): Promise<Session<C> | undefined> {
    const { deps } = this;
    const upgrade = describeUpgrade(req, 'sse', deps.proxies);
    // Status, text and log as an upgrade's refusal (rejectUpgrade, refuse): a failed hook is
    // logged where it failed, not again as a refusal. As a refused upgrade's socket is, the
    // connection is closed after the answer: a client refused here does not go on sending
    // requests on it.
    const refuse = (status: number, reason: string, message?: string, headers = {}): undefined => {
      deps.metrics.upgradeRejected(reason);
      if (reason !== 'auth-error' && reason !== 'auth-timeout') {
        deps.refusals.refused(
          { status, reason, transport: 'sse', remoteAddress: upgrade.remoteAddress },
          'upgrade rejected',
        );
      }
      const sent = sendableRefusal({ status, message, headers }, deps.logger);
      if (!res.headersSent) {
        res.writeHead(sent.status, {
          'content-type': 'text/plain; charset=utf-8',
          ...sent.headers,
          connection: 'close',
        });
      }
      res.end(`${sent.message ?? STATUS_CODES[sent.status] ?? 'Error'}\n`);
      return undefined;
    };
    if (deps.isClosing()) {
      return refuse(503, 'draining', 'Server shutting down', DRAINING_RETRY_AFTER);
    }
    if (this.refusingForBroker) {
      return refuse(503, 'broker-unavailable', 'Broker unavailable', BROKER_DOWN_RETRY_AFTER);
    }
    const admitted = deps.admission.admit(upgrade);
    if (typeof admitted !== 'function') {
      return refuse(admitted.status, admitted.reason, admitted.message, admitted.headers);
    }
    let kept = false;
    try {
      const identified = await this.identify(upgrade);
      if (!identified.ok) {
        if (identified.hook === 'userOf') return refuse(500, 'auth-error');
        const { status, reason, message, headers } = identified;
        return refuse(status, reason, message, headers);
      }
      const { context, user, pending } = identified;
      try {
        if (deps.isClosing()) {
          return refuse(503, 'draining', 'Server shutting down', DRAINING_RETRY_AFTER);
        }
        if (res.destroyed) return undefined; // the client left while the hooks ran
        const tooMany = deps.admission.admitUser(user);
        if (tooMany) {
          return refuse(tooMany.status, tooMany.reason, tooMany.message, tooMany.headers);
        }
        const transport = open();
        const session = deps.attach(
          transport,
          context,
          upgrade.remoteAddress,
          user,
          upgrade,
          pending,
        );
        kept = true;
        this.holdEventStream(res);
        transport.attach(res, undefined);
        session.logger.info(
          { transport: 'sse', remoteAddress: upgrade.remoteAddress },
          'connected',
        );
        return session;
      } finally {
        this.releaseUser(user);
      }
    } finally {
      if (!kept) this.release(admitted, upgrade);
    }
  }

  /**
   * A response about to become a session's event stream (the opening GET's, or a resume's):
   * its socket leaves the HTTP port's socket bounds, as a WebSocket's does, since the session
   * counts against the connection limits (maxConnections, maxConnectionsPerIp) instead; held
   * there, streams would fill maxHttpSockets and shut every other request out, health checks
   * included. The response closes its connection when it ends, so the socket never goes back to
   * serving requests outside the bounds.
   */
  holdEventStream(res: ServerResponse): void {
    res.shouldKeepAlive = false;
    this.deps.sockets?.handedOver(res.socket ?? res.req.socket);
  }

  /** Let go of an admission slot no session took (releaseAdmission: a hung hook holds it). */
  private release(admitted: () => void, request: UpgradeRequest): void {
    releaseAdmission(request, this.deps.limits.authenticateTimeoutMs, admitted);
  }

  /** A TCP socket or a pair of stdio streams: newline-delimited JSON once admitted. */
  async acceptStream(
    input: Readable,
    output: Writable,
    kind: 'stdio' | 'tcp',
    remoteAddress: string | undefined,
  ): Promise<Session<C> | undefined> {
    const { deps } = this;
    // An error event nobody listens to ends the process: a pipe whose reader is gone fails the
    // refusal's write (EPIPE), an input may fail while the hooks decide. Ignored here; once a
    // transport serves the streams it listens to them itself.
    input.on('error', ignoreError);
    output.on('error', ignoreError);
    const refuse = (status: number, message: string, reason: string): undefined => {
      // A client can cause these at will: the first of an interval at info, the rest counted.
      deps.refusals.refused(
        { reason, transport: kind, remoteAddress, status, message },
        'connection refused',
      );
      input.resume(); // whatever else it sends is thrown away
      // The line, then the end; a socket whose peer keeps its side open is destroyed soon after.
      output.end(streamRefusal(status, message), () => {
        if (kind === 'tcp') setTimeout(() => input.destroy(), 1_000).unref();
      });
      return undefined;
    };
    if (deps.isClosing()) return refuse(503, 'Server shutting down', 'draining');
    // A pipe (stdio) is the process's one connection: it is served, broker or not.
    if (kind === 'tcp' && this.refusingForBroker) {
      return refuse(503, 'Broker unavailable', 'broker-unavailable');
    }
    const request = describeStream(kind, remoteAddress);
    const admitted = deps.admission.admit(request);
    if (typeof admitted !== 'function') {
      return refuse(admitted.status, admitted.message, admitted.reason);
    }
    // The slot is released on every way out (refused, the client gone during a hook, a hook
    // throwing) except one: a session opened, which frees it when it closes.
    let kept = false;
    try {
      const session = await this.openStream(input, output, kind, request, refuse);
      kept = session !== undefined;
      session?.logger.info({ transport: kind, remoteAddress }, 'connected');
      return session;
    } catch (err) {
      deps.logger.error({ err, transport: kind, remoteAddress }, 'connection failed');
      return refuse(500, 'Internal server error', 'error');
    } finally {
      if (!kept) this.release(admitted, request);
    }
  }

  /** acceptStream after admission: the hooks, then the session (which takes the slot). */
  private async openStream(
    input: Readable,
    output: Writable,
    kind: 'stdio' | 'tcp',
    request: UpgradeRequest,
    refuse: (status: number, message: string, reason: string) => undefined,
  ): Promise<Session<C> | undefined> {
    const { deps } = this;
    const { remoteAddress } = request;
    const identified = await this.identify(request);
    if (!identified.ok) {
      if (identified.hook === 'userOf') return refuse(500, 'Internal server error', 'auth-error');
      const { status, message, reason } = identified;
      return refuse(status, message ?? 'Internal server error', reason);
    }
    const { context, user, pending } = identified;
    try {
      // A TCP client that left while the hooks ran: reset (destroyed), or ended having sent
      // nothing, whose 'end' has been emitted already: a transport made now would never see
      // it, and the session would hold its slot until keepalive gave up on the peer.
      const left = input.destroyed || (kind === 'tcp' && input.readableEnded);
      if (deps.isClosing()) return refuse(503, 'Server shutting down', 'draining');
      if (left) {
        input.destroy();
        return undefined;
      }
      const tooMany = deps.admission.admitUser(user);
      if (tooMany) return refuse(tooMany.status, tooMany.message, tooMany.reason);
      const transport = new NdjsonTransport(input, output, {
        kind,
        maxLineBytes: deps.limits.maxMessageBytes,
        maxBufferedBytes: deps.limits.maxBufferedBytes,
        counters: deps.metrics.countersFor(kind),
        // A TCP peer's lines cost the input budgets a WebSocket's messages do; stdio's are the
        // parent process's, which started the gateway.
        ...(kind === 'tcp' && {
          inputLimit: this.inputLimitFor(remoteAddress, 'tcp'),
          messageCostBytes: deps.limits.messageCostBytes,
        }),
        // `echo request | server` or a half-closed socket: answer what came, then close; the
        // answers are written (the close waits for them) by the same deadline.
        endOfInputDeadlineMs: deps.limits.endOfInputDeadlineMs,
        onInputEnd: (deadline) =>
          void closeWhenIdle(session, deadline, CloseCode.Normal, 'input ended'),
      });
      const session = deps.attach(transport, context, remoteAddress, user, request, pending);
      // The lines the transport refuses itself cost the session's rate limit too.
      transport.admit = session;
      return session;
    } finally {
      this.releaseUser(user);
    }
  }

  /**
   * The identity gates every transport passes after admission: `authenticate` (skipped for a
   * connection accepted to authenticate in-band), then `userOf`, whose user is held (holdUser)
   * until the caller releases it. A failure says which hook refused or failed, for the caller
   * to answer in its own way.
   */
  private async identify(request: UpgradeRequest): Promise<Identified<C>> {
    const { deps } = this;
    if (this.inBand(request)) {
      return { ok: true, context: undefined as C, user: undefined, pending: true };
    }
    const mark = revocationMark();
    const auth = await runAuthenticate(
      deps.authenticate,
      request,
      deps.logger,
      deps.limits.authenticateTimeoutMs,
    );
    if (!auth.ok) return { ...auth, hook: 'authenticate' };
    const held = await this.holdUser(auth.context);
    if (!held.ok) return { ok: false, hook: 'userOf' };
    // A revocation of the user that landed during the hold found no session to close: refused as
    // the deny check refuses. Checked last: from here to the session's opening in the caller
    // nothing waits on I/O, so no revocation can land in between.
    let revoked: boolean;
    try {
      revoked = revokedSince(deps.authenticate, held.user, auth.context, mark);
    } catch (err) {
      // identity.issuedAtOf threw: refused as a failing authenticate is (500).
      this.releaseUser(held.user);
      deps.logger.error({ err }, 'identity.issuedAtOf failed');
      return authFailed(500, undefined, 'auth-error');
    }
    if (revoked) {
      this.releaseUser(held.user);
      return authFailed(401, 'revoked', 'unauthenticated');
    }
    return { ok: true, context: auth.context, user: held.user, pending: false };
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
      user = this.deps.config.auth.userOf?.(context);
    } catch (err) {
      // A failing hook refuses the connection (500), as a failing authenticate does.
      this.deps.logger.error({ err }, 'userOf failed');
      return { ok: false };
    }
    if (user === undefined) return { ok: true, user };
    await this.deps.router.holdUser(user);
    return { ok: true, user };
  }

  private releaseUser(user: string | undefined): void {
    if (user !== undefined) this.deps.router.userDisconnected(user);
  }
}

/** A refusal of the identity gates, as runAuthenticate reports one of the hook. */
function authFailed<C>(
  status: number,
  message: string | undefined,
  reason: 'unauthenticated' | 'auth-error',
): Identified<C> {
  return { ok: false, hook: 'authenticate', status, message, headers: undefined, reason };
}

// Shared by every upgrading socket (`this` is the socket): no closure per connection.
function destroySocket(this: Duplex): void {
  this.destroy();
}
