import { IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../peer/logger.js';
import { AddressBudget, AddressBudgets } from './address-budgets.js';
import { addressGroupOf } from './address-group.js';
import { servedAside } from './admission.js';
import { closeUnread, sendText, serveLivez, serveReadyz } from './http-routes.js';
import type { Readiness } from './http-routes.js';
import type { HttpRpc } from './http-rpc.js';
import type { GatewayMetrics } from './metrics.js';
import type { ResolvedRoutes } from './options.js';
import type { SseEndpoint } from './sse-endpoint.js';
import { RateLimit, monotonicMs } from './token-bucket.js';

/**
 * What the gateway answers on its port besides WebSocket upgrades: its `routes`, and plain
 * requests to its WebSocket path (`websocket`: 426, telling a browser or curl user to upgrade).
 */
export type Route = 'livez' | 'readyz' | 'metrics' | 'openrpc' | 'rpc' | 'events' | 'websocket';

export interface HttpDispatchDeps<C> {
  /** Plain requests none of the gateway's routes take (GatewayOptions.httpHandler). */
  httpHandler:
    ((req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>) | undefined;
  /** The WebSocket endpoint's path. */
  path: string;
  /** Where each route is, or false (GatewayOptions.routes, resolved). */
  routes: ResolvedRoutes;
  logger: Logger;
  metrics: GatewayMetrics;
  httpRpc: Pick<HttpRpc<C>, 'handle' | 'preflight'>;
  /** The HTTP streaming fallback (`routes.events`). */
  events: Pick<SseEndpoint<C>, 'handle'>;
  readiness(): Readiness;
  sessionCount(): number;
  /** The OpenRPC document, serialised, once `serveDiscovery` was called. */
  discovery(): string | undefined;
  /** limits.probeRequestsPerSecondPerIp: the budget of the operational routes; absent: none. */
  probes?: ProbeBudget;
}

/** The limits a ProbeBudget is made from (GatewayLimits, resolved). */
export interface ProbeLimits {
  /** 0: off. */
  probeRequestsPerSecondPerIp: number;
  probeRequestsBurstPerIp: number;
  /** How many address groups' buckets are kept at most. */
  maxHttpSockets: number;
}

/**
 * limits.probeRequestsPerSecondPerIp: a token bucket per address group for the gateway's
 * operational routes (probes, metrics, the OpenRPC document, the upgrade hints). A request
 * holds its group's entry only while it takes a token, so every entry is kept just until its
 * bucket would be full again (AddressBudgets: dropped then, no timer), at most maxHttpSockets
 * of them; a new group finding the table full takes the place of the entry nearest to full,
 * which an address that keeps its bucket empty never is.
 */
export class ProbeBudget {
  private readonly budgets: AddressBudgets | undefined;

  constructor(
    limits: ProbeLimits,
    /** The client's address of a request (trusted proxies looked through). */
    private readonly clientAddress: (req: IncomingMessage) => string | undefined = (req) =>
      req.socket.remoteAddress,
    /** The clock of the buckets (monotonicMs, as every bucket's). */
    now: () => number = monotonicMs,
  ) {
    const perSecond = limits.probeRequestsPerSecondPerIp;
    if (perSecond <= 0) return;
    const limit = new RateLimit(perSecond, limits.probeRequestsBurstPerIp, now);
    this.budgets = new AddressBudgets(
      limit,
      limits.maxHttpSockets,
      (group) => new AddressBudget(limit, group),
    );
  }

  /** Address groups whose buckets are kept. */
  get size(): number {
    return this.budgets?.size ?? 0;
  }

  /**
   * Take a token for `req`'s address group: undefined when taken (or when none can be kept, a
   * state AddressBudgets reaches only while entries are held), else the whole seconds until
   * there is one, at least 1, for Retry-After.
   */
  refuse(req: IncomingMessage): number | undefined {
    const budgets = this.budgets;
    if (budgets === undefined) return undefined;
    const group = addressGroupOf('http', this.clientAddress(req))!;
    const entry = budgets.acquire(group);
    if (entry === undefined) return undefined;
    const seconds = entry.take() ? undefined : entry.retryAfterSeconds();
    budgets.release(entry);
    return seconds;
  }
}

/**
 * Whether a request to `route` spends from the operational budget: everything but JSON-RPC
 * over POST, its CORS preflights and the event stream, whose limits are the sessions'.
 */
function isOperational(route: Route, method: string | undefined): boolean {
  if (route === 'events') return false;
  return route !== 'rpc' || (method !== 'POST' && method !== 'OPTIONS');
}

/** A request target in absolute form (`GET http://host/rpc`), as proxies are sent it. */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * A request target's path, without its query string. A target in absolute form is read for its
 * path too: a server must accept that form (RFC 9112, section 3.2.2), whatever sends it.
 */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/';
  if (target.charCodeAt(0) !== 0x2f && ABSOLUTE_FORM.test(target)) {
    try {
      return new URL(target).pathname;
    } catch {
      return target;
    }
  }
  return target.split('?', 1)[0]!;
}

/**
 * The gateway's routing table in one place: which of its routes a request is for, if any.
 * Routes have a path each (checked by `resolveRoutes`); the OpenRPC one only once there is a
 * document to serve. With `routes.rpc` off, plain requests to the WebSocket path are the
 * application's, as any turned-off route's path is (the upgrade hint answers them only where
 * nothing else would: `ServerHub.nobodyTook`).
 */
export function routeFor<C>(deps: HttpDispatchDeps<C>, req: IncomingMessage): Route | undefined {
  const path = pathOf(req.url);
  const { routes } = deps;
  if (path === routes.rpc) return 'rpc';
  if (path === routes.events) return 'events';
  if (path === deps.path && routes.rpc !== false) return 'websocket';
  if (path === routes.livez) return 'livez';
  if (path === routes.readyz) return 'readyz';
  if (path === routes.metrics) return 'metrics';
  if (path === routes.openrpc && deps.discovery() !== undefined) return 'openrpc';
  return undefined;
}

/**
 * Answer a request for one of the gateway's routes. On the RPC route, POST is JSON-RPC over
 * HTTP, OPTIONS a CORS preflight, and a GET gets 426 when the WebSocket is on the same path.
 */
export async function serveRoute<C>(
  deps: HttpDispatchDeps<C>,
  req: IncomingMessage,
  res: ServerResponse,
  route: Route,
): Promise<void> {
  // JSON-RPC POSTs and the event stream's requests read their bodies (within bodyTimeoutMs).
  const readsBody = (route === 'rpc' && req.method === 'POST') || route === 'events';
  if (!readsBody) closeUnread(req, res);
  const retryAfter = isOperational(route, req.method) ? deps.probes?.refuse(req) : undefined;
  if (retryAfter !== undefined) {
    deps.metrics.httpSocketClosed('probe-rate');
    res.setHeader('retry-after', String(retryAfter));
    res.setHeader('connection', 'close');
    sendText(
      res,
      429,
      'Too many requests from this address (limits.probeRequestsPerSecondPerIp)\n',
    );
    return;
  }
  try {
    switch (route) {
      case 'livez':
        return serveLivez(res);
      case 'readyz':
        return serveReadyz(res, { status: deps.readiness(), sessions: deps.sessionCount() });
      case 'openrpc': {
        const discovery = deps.discovery();
        if (discovery === undefined) return sendText(res, 404, 'Not found\n');
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'access-control-allow-origin': '*',
        });
        res.end(discovery);
        return;
      }
      case 'metrics': {
        const text = await deps.metrics.render();
        res.writeHead(200, {
          'content-type': deps.metrics.contentType,
          'cache-control': 'no-store',
        });
        res.end(text);
        return;
      }
      case 'rpc':
        if (req.method === 'POST') return await deps.httpRpc.handle(req, res);
        if (req.method === 'OPTIONS') return deps.httpRpc.preflight(req, res, rpcMethods(deps));
        if (deps.routes.rpc !== deps.path) {
          res.setHeader('allow', rpcMethods(deps));
          return sendText(res, 405, 'Use POST for JSON-RPC over HTTP.\n');
        }
        return upgradeHint(req, res, rpcMethods(deps));
      case 'events':
        return await deps.events.handle(req, res);
      case 'websocket':
        return upgradeHint(req, res, 'GET');
    }
  } catch (err) {
    deps.logger.error({ err }, 'http handler failed');
    closeUnread(req, res);
    if (!res.headersSent) sendText(res, 500, 'Internal server error\n');
    else res.destroy();
  }
}

/** The methods the RPC route takes (its Allow header): GET too where it is the WebSocket's path. */
function rpcMethods<C>(deps: HttpDispatchDeps<C>): string {
  return deps.routes.rpc === deps.path ? 'GET, POST, OPTIONS' : 'POST, OPTIONS';
}

/** A plain request to the WebSocket path: 426 for a GET, 405 for other methods. */
function upgradeHint(req: IncomingMessage, res: ServerResponse, allow: string): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', allow);
    const post = allow.includes('POST') ? 'Use POST for JSON-RPC over HTTP, or ' : 'Use ';
    sendText(res, 405, `${post}GET with an Upgrade for WebSocket.\n`);
    return;
  }
  res.setHeader('upgrade', 'websocket');
  const post = allow.includes('POST') ? ' or over HTTP POST' : '';
  sendText(
    res,
    426,
    `This endpoint speaks JSON-RPC over WebSocket (send an Upgrade request)${post}.\n`,
  );
}

/**
 * A request none of the gateway's routes took: the application's `httpHandler`, if any.
 * Whether it answered (a handler that throws is answered 500).
 */
export async function serveOther<C>(
  deps: HttpDispatchDeps<C>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<boolean> {
  const handler = deps.httpHandler;
  if (!handler) return false;
  try {
    return await handler(req, res);
  } catch (err) {
    deps.logger.error({ err }, 'http handler failed');
    if (!res.headersSent) sendText(res, 500, 'Internal server error\n');
    else res.destroy();
    return true;
  }
}

/** One gateway's share of an HTTP server, as the server's hub sees it. */
export interface ServerTenant {
  /** The gateway created the server: an upgrade nobody takes is its to refuse before another's. */
  readonly ownsServer: boolean;
  /** Every path the gateway answers, with the option that names it (for conflicts). */
  readonly paths: ReadonlyMap<string, string>;
  /** Which of its routes a request is for, if any. */
  route(req: IncomingMessage): Route | undefined;
  serve(req: IncomingMessage, res: ServerResponse, route: Route): void;
  /** Whether an upgrade is for its WebSocket path. */
  takesUpgrade(req: IncomingMessage): boolean;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /**
   * A request's or an upgrade's headers have arrived on `socket`, whoever takes it (the socket
   * bounds stop its headers timer); `away`: an upgrade this gateway does not take.
   */
  headersRead(socket: Duplex, away: boolean): void;
  /** A request no gateway took: its `httpHandler`; whether that answered. */
  other(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** Answer an upgrade no listener takes: 404. */
  refuseUpgrade(socket: Duplex): void;
}

/** Events the hub looks at before the server's listeners do. */
type TakenEvent = 'request' | 'checkContinue' | 'upgrade';

/**
 * Registered symbols, so that two copies of this package on one server (two versions in one
 * application, each with its hub) see each other's: the mark of a hub's 'upgrade' listener, and
 * what the `httpHandler`s of the hubs a request went through answer, kept on the request.
 */
const HUB_LISTENER = Symbol.for('wsrpc-gateway.hub-listener');
const HANDLERS = Symbol.for('wsrpc-gateway.http-handlers');

function isHubListener(listener: unknown): boolean {
  return (listener as { [HUB_LISTENER]?: unknown })[HUB_LISTENER] === true;
}

/** The answers of the `httpHandler`s a request has been offered to, by the hubs it went through. */
function handlersOf(req: IncomingMessage): Promise<boolean>[] {
  const holder = req as IncomingMessage & { [HANDLERS]?: Promise<boolean>[] };
  return (holder[HANDLERS] ??= []);
}

/**
 * The gateways on one HTTP server. A gateway's requests and upgrades are taken before the
 * server's 'request' and 'upgrade' listeners see them (the hub wraps the server's `emit` for
 * those events), so an Express or Fastify app, another WebSocket endpoint or another gateway on
 * the same server never answers them, whichever was attached first; everything else goes to
 * the listeners as it came, untouched. A request no listener takes and an upgrade no listener
 * but the hubs' can take are answered 404, as on a server of the gateway's own.
 *
 * Whether anybody else takes a request is what the server's `emit` returns: the hub adds no
 * 'request' listener, which could not tell whether the others answer (an application answers
 * after awaits; engine.io, attached after it, takes every 'request' listener off and calls them
 * itself, so that the count of listeners says nothing, and keeps them after the hub is gone).
 * It adds an 'upgrade' listener, without which Node does not hand an upgrade over at all; the
 * server's other 'upgrade' listeners are those without the hubs' mark.
 */
class ServerHub {
  private readonly tenants: ServerTenant[] = [];
  private readonly ownEmit: boolean;
  private readonly emit: HttpServer['emit'];
  private readonly wrapper: HttpServer['emit'];
  private readonly onUpgrade = Object.assign(
    (_req: IncomingMessage, socket: Duplex): void => this.upgradeNobodyTook(socket),
    { [HUB_LISTENER]: true },
  );
  /** Sockets of upgrades served as requests, open: Node's server no longer sees them. */
  private readonly served = new Set<Duplex>();

  constructor(private readonly server: HttpServer) {
    this.ownEmit = Object.hasOwn(server, 'emit');
    // eslint-disable-next-line @typescript-eslint/unbound-method -- applied to the server below
    const emit = server.emit;
    this.emit = emit;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- `this` of the wrapper is the server
    const hub = this;
    this.wrapper = function (this: HttpServer, event: string | symbol, ...args: unknown[]) {
      if (hub.tenants.length === 0 || !isTaken(event)) {
        return Reflect.apply(emit, this, [event, ...args]) as boolean;
      }
      return hub.take(event, args, () => Reflect.apply(emit, this, [event, ...args]) as boolean);
    } as HttpServer['emit'];
    server.emit = this.wrapper;
    server.on('upgrade', this.onUpgrade);
  }

  get empty(): boolean {
    return this.tenants.length === 0;
  }

  /** Throws a RangeError when another gateway on this server answers one of `paths` already. */
  check(paths: ReadonlyMap<string, string>): void {
    const taken: string[] = [];
    for (const [path, option] of paths) {
      const other = this.tenants.find((tenant) => tenant.paths.has(path));
      if (other) taken.push(`${option} ${JSON.stringify(path)} (its ${other.paths.get(path)})`);
    }
    if (taken.length === 0) return;
    throw new RangeError(
      `another gateway on this server answers ${taken.join(', ')} already: give this one other paths, or turn its routes off (routes: { livez: false, ... })`,
    );
  }

  add(tenant: ServerTenant): void {
    this.check(tenant.paths);
    this.tenants.push(tenant);
  }

  remove(tenant: ServerTenant): void {
    const at = this.tenants.indexOf(tenant);
    if (at >= 0) this.tenants.splice(at, 1);
  }

  /** The last gateway left: the server's `emit` and listeners are as they were. */
  dismantle(): void {
    this.server.off('upgrade', this.onUpgrade);
    if (this.server.emit !== this.wrapper) return; // wrapped again since: ours passes through
    if (this.ownEmit) this.server.emit = this.emit;
    else delete (this.server as { emit?: unknown }).emit;
  }

  /**
   * A gateway's request or upgrade is taken; any other goes on to the server's listeners
   * (`pass`), and a request none of them takes is answered here. Every gateway's socket bounds
   * see its headers.
   */
  private take(event: TakenEvent, args: unknown[], pass: () => boolean): boolean {
    if (event === 'upgrade') {
      const [req, socket, head] = args as [IncomingMessage, Duplex, Buffer];
      return this.takeUpgrade(req, socket, head) || pass();
    }
    const [req, res] = args as [IncomingMessage, ServerResponse];
    for (const tenant of this.tenants) tenant.headersRead(req.socket, false);
    for (const tenant of this.tenants) {
      const route = tenant.route(req);
      if (route === undefined) continue;
      // With a 'checkContinue' listener on the server, Node leaves the 100 to it.
      if (event === 'checkContinue') res.writeContinue();
      tenant.serve(req, res, route);
      return true;
    }
    // Node emits 'checkContinue' only to a listener of its own: the application's request.
    if (event === 'checkContinue') return pass();
    // The httpHandlers see it as the server's listeners do; whichever hub finds that no listener
    // takes it (the innermost wrapper, with two copies of this package) answers once all declined.
    const handlers = handlersOf(req);
    handlers.push(this.others(req, res));
    if (!pass()) void this.nobodyTook(req, res, handlers);
    return true;
  }

  /** Whether the upgrade is taken here: a gateway's, or served as a request. */
  private takeUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (!isWebSocketUpgrade(req)) {
      // Another protocol (h2c: curl --http2): a server may ignore an Upgrade (RFC 9110 7.8), and
      // the gateway's routes and what nobody else listens for are served as plain requests.
      if (this.tenants.some((tenant) => tenant.route(req) !== undefined)) {
        this.serveIgnoringUpgrade(req, socket, head);
        return true;
      }
      if (!this.upgradesAlone()) {
        for (const tenant of this.tenants) tenant.headersRead(socket, true);
        return false;
      }
      // Node handed it over only because the hubs listen for upgrades: the application's
      // handler gets it as Node would have given it without them.
      if (this.server.listenerCount('request') > 0 && this.reparse(req, socket, head)) return true;
      this.serveIgnoringUpgrade(req, socket, head);
      return true;
    }
    const taker = this.tenants.find((tenant) => tenant.takesUpgrade(req));
    // An upgrade nobody takes that the gateways answer (404) stays an HTTP socket, counted,
    // until it closes; one another listener takes is no HTTP socket of theirs any more.
    const elsewhere = taker === undefined && !this.upgradesAlone();
    for (const tenant of this.tenants) {
      tenant.headersRead(socket, taker === undefined ? elsewhere : tenant !== taker);
    }
    if (!taker) return false;
    taker.upgrade(req, socket, head);
    return true;
  }

  /** Whether the server's only 'upgrade' listeners are hubs': nobody else takes an upgrade. */
  private upgradesAlone(): boolean {
    return this.server.listeners('upgrade').every(isHubListener);
  }

  /** The gateways' httpHandlers, in turn, until one answers: whether one did. */
  private async others(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    for (const tenant of [...this.tenants]) if (await tenant.other(req, res)) return true;
    return false;
  }

  /**
   * A request no listener of the server takes, once every httpHandler it was offered to declined:
   * on the WebSocket path of a gateway whose `routes.rpc` is off, the upgrade hint (the path is
   * the application's only where it has a listener); else 404.
   */
  private async nobodyTook(
    req: IncomingMessage,
    res: ServerResponse,
    handlers: readonly Promise<boolean>[],
  ): Promise<void> {
    for (const answered of handlers) if (await answered) return;
    if (res.headersSent) return;
    const home = this.tenants.find((tenant) => tenant.takesUpgrade(req));
    if (home) return home.serve(req, res, 'websocket');
    closeUnread(req, res);
    sendText(res, 404, 'Not found\n');
  }

  /**
   * Give an upgrade back to Node's HTTP server as the plain request it also is: its head again,
   * less the `upgrade` token of its Connection header (so that it is no upgrade to Node's parser
   * this time), then whatever came after it, read by Node's own connection handler as on any
   * new socket. Keep-alive, chunked bodies, `requestTimeout` and `closeAllConnections` then hold
   * for it as for any request. False when the server has no such handler (not Node's http).
   */
  private reparse(upgrade: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const handler = [
      ...this.server.listeners('connection'),
      ...this.server.listeners('secureConnection'),
    ].find((listener) => listener.name === 'connectionListener');
    if (handler === undefined) return false;
    socket.unshift(Buffer.concat([Buffer.from(plainHead(upgrade), 'latin1'), head]));
    Reflect.apply(handler, this.server, [socket]);
    return true;
  }

  /**
   * A request with an Upgrade to a protocol other than WebSocket, answered as the HTTP/1.1
   * request it also is, on a connection closed after the answer. Node handed the socket over
   * as an upgrade once the headers were parsed, and ended that request's body: the request is
   * made again with the same head, its body what came after the headers and then the socket's
   * data, up to its Content-Length. A chunked body is refused (411): this is no HTTP parser.
   * For the gateways' routes, and on a server without a 'request' listener (`httpHandler`'s
   * requests); the application's listener gets its requests through `reparse`.
   */
  private serveIgnoringUpgrade(upgrade: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.keep(socket);
    const req = requestLike(upgrade, socket);
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    res.once('finish', () => {
      res.detachSocket(socket as Socket);
      socket.once('finish', () => socket.destroy());
      socket.end();
    });
    // The socket bounds follow it as a request of Node's: its socket waits on its client while
    // its body is to come, and may be cut for room then.
    servedAside(this.server, req, res);
    const length = Number(req.headers['content-length'] ?? 0);
    if (req.headers['transfer-encoding'] !== undefined || !Number.isSafeInteger(length)) {
      for (const tenant of this.tenants) tenant.headersRead(socket, false);
      sendText(
        res,
        411,
        'Send the body with Content-Length, or send the request without Upgrade: h2c.\n',
      );
      return;
    }
    const read = this.timeRequest(socket, res);
    let left = length;
    const end = (): void => {
      read();
      socket.off('data', feed);
      req.complete = true;
      req.push(null);
      // Nothing more is read, but a client that leaves must still be seen ('end').
      socket.resume();
    };
    const feed = (chunk: Buffer): void => {
      const part = chunk.subarray(0, left);
      left -= part.length;
      if (!req.push(part)) socket.pause();
      if (left === 0) end();
    };
    // The request reads on from the socket when its reader wants more.
    req._read = () => void socket.resume();
    socket.once('close', () => {
      if (!req.complete) req.destroy();
    });
    if (left === 0) end();
    else {
      feed(head);
      if (left > 0) socket.on('data', feed);
    }
    if (/^100-continue$/i.test(req.headers.expect ?? '')) res.writeContinue();
    this.server.emit('request', req, res);
  }

  /**
   * An upgraded socket is Node's server's no more: nothing of it handles the client's FIN (the
   * socket allows half-open), and closeAllConnections does not see it. Served as a request, it
   * is destroyed on an error and once the client has ended its side, as Node's server does with
   * its own, so a client that leaves frees its place in the socket bounds; and kept in `served`
   * for `closeServed`.
   */
  private keep(socket: Duplex): void {
    this.served.add(socket);
    socket.on('error', () => socket.destroy());
    socket.once('end', () => socket.destroy());
    socket.once('close', () => this.served.delete(socket));
  }

  /**
   * Node's requestTimeout, which does not run for an upgraded socket: the request must be all
   * in within the server's requestTimeout of its headers having been read (which Node's
   * headersTimeout bounded), or it is answered 408 (unless an answer has begun) and its socket
   * destroyed, whatever reads its body. Timed from its headers rather than from its first
   * byte, which would take a start time kept for every connection the server accepts. Returns
   * what stops the timer once the request is all in.
   */
  private timeRequest(socket: Duplex, res: ServerResponse): () => void {
    const bound = this.server.requestTimeout;
    if (!(bound > 0)) return () => undefined;
    const expired = (): void => {
      if (socket.writable && !res.headersSent) socket.write(REQUEST_TIMEOUT);
      socket.destroy();
    };
    const timer = setTimeout(expired, bound);
    timer.unref();
    const stop = (): void => clearTimeout(timer);
    socket.once('close', stop);
    return stop;
  }

  /** Destroy the sockets of upgrades served as requests (the server is closing). */
  closeServed(): void {
    for (const socket of this.served) socket.destroy();
  }

  private upgradeNobodyTook(socket: Duplex): void {
    const listeners = this.server.listeners('upgrade');
    // Another listener's, or nobody's: left alone. With two copies of this package on the
    // server, the first hub's listener answers.
    if (!listeners.every(isHubListener) || listeners[0] !== this.onUpgrade) return;
    const tenant = this.tenants.find((candidate) => candidate.ownsServer) ?? this.tenants[0];
    tenant?.refuseUpgrade(socket);
  }
}

/** What Node's server writes when a request is not all in within its requestTimeout. */
const REQUEST_TIMEOUT = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';

/**
 * The head of `upgrade` as the client sent it, less the `upgrade` token of its Connection
 * header (its Upgrade header stays, as Node leaves it on a request it does not upgrade). Header
 * text is Latin-1 both ways, as Node's parser reads it.
 */
function plainHead(upgrade: IncomingMessage): string {
  let text = `${upgrade.method} ${upgrade.url} HTTP/${upgrade.httpVersion}\r\n`;
  const raw = upgrade.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    let value = raw[i + 1]!;
    if (name.toLowerCase() === 'connection') {
      value = value
        .split(',')
        .map((token) => token.trim())
        .filter((token) => token !== '' && token.toLowerCase() !== 'upgrade')
        .join(', ');
      if (value === '') continue;
    }
    text += `${name}: ${value}\r\n`;
  }
  return `${text}\r\n`;
}

/** An HTTP request with `upgrade`'s head, reading from `socket`. */
function requestLike(upgrade: IncomingMessage, socket: Duplex): IncomingMessage {
  const req = new IncomingMessage(socket as Socket);
  req.method = upgrade.method;
  req.url = upgrade.url;
  req.httpVersion = upgrade.httpVersion;
  req.httpVersionMajor = upgrade.httpVersionMajor;
  req.httpVersionMinor = upgrade.httpVersionMinor;
  req.rawHeaders = upgrade.rawHeaders;
  req.headers = upgrade.headers;
  return req;
}

/** Whether an upgrade asks for WebSocket (the Upgrade header names it, in any case). */
function isWebSocketUpgrade(req: IncomingMessage): boolean {
  return (req.headers.upgrade ?? '')
    .split(',')
    .some((token) => token.trim().toLowerCase() === 'websocket');
}

function isTaken(event: string | symbol): event is TakenEvent {
  return event === 'request' || event === 'upgrade' || event === 'checkContinue';
}

const hubs = new WeakMap<HttpServer, ServerHub>();

/**
 * Before a gateway is made on `server`: a RangeError naming the paths another gateway on it
 * answers already (its WebSocket path, its routes).
 */
export function checkPathsFree(server: HttpServer, paths: ReadonlyMap<string, string>): void {
  hubs.get(server)?.check(paths);
}

/**
 * Destroy the sockets of `server`'s upgrades that are served as requests (`Upgrade: h2c`):
 * Node's closeAllConnections does not see them, and `server.close()` waits for them.
 */
export function closeServedUpgrades(server: HttpServer): void {
  hubs.get(server)?.closeServed();
}

/**
 * Put a gateway on `server`: its requests and upgrades are taken before the server's listeners
 * see them. Returns what takes it off again; the last one off leaves the server as it found it.
 */
export function joinServer(server: HttpServer, tenant: ServerTenant): () => void {
  let hub = hubs.get(server);
  if (!hub) {
    hub = new ServerHub(server);
    hubs.set(server, hub);
  }
  const joined = hub;
  try {
    joined.add(tenant);
  } catch (err) {
    if (joined.empty) {
      joined.dismantle();
      hubs.delete(server);
    }
    throw err;
  }
  let left = false;
  return () => {
    if (left) return;
    left = true;
    joined.remove(tenant);
    if (!joined.empty || hubs.get(server) !== joined) return;
    joined.dismantle();
    hubs.delete(server);
  };
}
