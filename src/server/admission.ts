import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { Duplex, Writable } from 'node:stream';
import type { Logger } from '../peer/logger.js';
import { isPromiseLike } from '../peer/replies.js';
import type { TransportKind } from '../transport/transport.js';
import { AddressBudget, AddressBudgets } from './address-budgets.js';
import { addressGroup, addressGroupOf, ipv6SiteOf } from './address-group.js';
import type { UpgradeRequest } from './options.js';
import { RateLimit, monotonicMs } from './token-bucket.js';
import { UserConnections } from './user-connections.js';

export interface AdmissionLimits {
  maxConnections: number;
  maxConnectionsPerIp: number;
  /** Connections from one IPv6 /48 together (ipv6SiteOf); absent: not bounded. */
  maxConnectionsPerIpv6Site?: number;
  /** Absent or 0: new connections per address are not rate limited. */
  connectionsPerSecondPerIp?: number;
  /** Absent: as many as maxConnectionsPerIp. */
  connectionsBurstPerIp?: number;
  /** Sessions of one user (`userOf`) on this node; absent: not bounded. */
  maxConnectionsPerUser?: number;
}

export interface Refusal {
  status: number;
  message: string;
  /** Why, for the rejected-upgrades metric and the log. */
  reason: 'origin' | 'capacity' | 'ip-limit' | 'ip-rate' | 'user-limit';
  headers?: Record<string, string>;
}

/**
 * Which Origins may open a WebSocket: a list of exact origins (`["*"]` alone: every origin), or a
 * predicate. Without one, a browser's Origin must name the host the request was sent to (sameHost).
 */
export type OriginPolicy = readonly string[] | ((origin: string) => boolean);

/** The one entry of an `allowedOrigins` list that admits every origin. */
export const ANY_ORIGIN = '*';

/** What is logged, once, when an `allowedOrigins` predicate answers anything but a boolean. */
export const NOT_BOOLEAN_ORIGIN_ANSWER =
  'allowedOrigins predicate must return a boolean synchronously: it returned no boolean (an async predicate returns a Promise), and only true allows an Origin, so it was refused';

/** What is logged, once, when an `allowedOrigins` predicate throws. */
export const THROWING_ORIGIN_PREDICATE = 'allowedOrigins predicate threw: the Origin was refused';

/**
 * `predicate` as admission asks it: an Origin is allowed only when it returns `true`. Anything
 * else refuses, a promise above all: admission decides in the turn the request came in, and an
 * async predicate's promise, truthy whatever it will hold, would let every page in. The first
 * such answer is logged (error), once, since every request would repeat it; a rejected promise
 * is caught, so that it does not end the process as an unhandled rejection. One that throws
 * refuses too (a 403, where a 500 would say nothing of why), logged once as well.
 */
export function booleanOriginPredicate(
  predicate: (origin: string) => unknown,
  logger: Logger,
): (origin: string) => boolean {
  let told = false;
  let toldThrow = false;
  return (origin) => {
    let answer: unknown;
    try {
      answer = predicate(origin);
    } catch (err) {
      if (!toldThrow) logger.error({ err }, THROWING_ORIGIN_PREDICATE);
      toldThrow = true;
      return false;
    }
    if (typeof answer === 'boolean') return answer;
    if (isPromiseLike(answer)) Promise.resolve(answer).catch(() => undefined);
    if (!told) {
      told = true;
      logger.error(
        { returned: isPromiseLike(answer) ? 'promise' : typeof answer },
        NOT_BOOLEAN_ORIGIN_ANSWER,
      );
    }
    return false;
  };
}

/** The last Origin, Host and scheme compared by sameHost, and the answer: a page's connections repeat them. */
let lastOrigin: string | undefined;
let lastHost: string | undefined;
let lastTls = false;
let lastSame = false;

/**
 * Without `allowedOrigins`: whether a browser's `origin` names the host the request was sent to
 * (its Host header), at any port. A browser sends its cookies with an upgrade from any site, so
 * a page elsewhere must not open a session as the user (cross-site WebSocket hijacking) unless
 * the gateway lists it; cookies are not kept apart by port either, so a page on another port of
 * the same host (a dev server, a proxy's port that `$host` leaves out) is let in. They are not
 * kept apart by scheme either, `Secure` ones included (they go wherever the request is TLS): so a
 * request known to have come over TLS (`tls`) is let in only from an `https:` page, not from a
 * plain `http:` one anyone on the network can write into. An Origin that is no URL (`null`, from
 * a sandboxed iframe or a file) never matches.
 */
export function sameHost(origin: string, host: string | undefined, tls = false): boolean {
  if (origin === lastOrigin && host === lastHost && tls === lastTls) return lastSame;
  let same = false;
  if (host !== undefined) {
    try {
      // The Host header parsed the way the Origin is, so case, brackets and IDN forms compare.
      const page = new URL(origin);
      same =
        page.hostname === new URL(`http://${host}`).hostname &&
        (!tls || page.protocol === 'https:');
    } catch {
      same = false;
    }
  }
  lastOrigin = origin;
  lastHost = host;
  lastTls = tls;
  lastSame = same;
  return same;
}

/** One fewer under `key` in `counts`, the entry dropped at none. */
function countDown(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

/**
 * Whether a connection counts in the connection rate: every kept connection (WebSocket, event
 * stream, TCP) does, an HTTP POST exchange (a request, not a connection) does not.
 */
function keptConnection(transport: TransportKind): boolean {
  return transport !== 'http';
}

/**
 * limits.connectionsPerSecondPerIp: a token bucket per address group, entries held by the
 * group's open connections (AddressBudgets: kept after the last closes until full, so closing
 * and reopening does not refill it), at most maxConnections of them. Undefined when off.
 */
function connectionRatesOf(limits: AdmissionLimits, now: () => number) {
  const perSecond = limits.connectionsPerSecondPerIp ?? 0;
  if (perSecond <= 0) return undefined;
  const burst = limits.connectionsBurstPerIp ?? limits.maxConnectionsPerIp;
  const limit = new RateLimit(perSecond, burst, now);
  return new AddressBudgets(
    limit,
    limits.maxConnections,
    (group) => new AddressBudget(limit, group),
  );
}

/**
 * Who gets past the door before authentication runs: origin allow-list, connection counts
 * (total, per IP and per IPv6 /48) and the rate of new connections per IP. A slot is held from admission
 * until the returned release function (socket closed or upgrade failed) or `release` (session
 * closed) is called. After authentication, `admitUser` bounds the sessions per user, which the
 * session table counts in `users` (from a session's identity to its close).
 */
export class Admission {
  /** Sessions per user on this node (limits.maxConnectionsPerUser), counted by the session table. */
  readonly users: UserConnections;
  private total = 0;
  private readonly perIp = new Map<string, number>();
  /** Connections per IPv6 /48 (maxConnectionsPerIpv6Site); IPv4 addresses have no entry. */
  private readonly perSite = new Map<string, number>();
  /**
   * The connection-rate bucket of each address group with kept connections (or refilling).
   * Every admitted kept connection holds its group's entry until released. `acquire` always
   * finds room: the entries held are at most the connections counted in `total`, which is
   * below maxConnections (the table's bound) whenever a connection is admitted; so `release`
   * finds the entry a connection holds by its group.
   */
  private readonly rates: AddressBudgets | undefined;

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly origins: OriginPolicy | undefined,
    /** Whether a request came over TLS (sentOverTls): sameHost then wants an https page. */
    private readonly overTls: (request: IncomingMessage) => boolean = () => false,
    /** The clock of the connection-rate buckets (a monotonic one: a wall clock's steps back would be debt). */
    now: () => number = monotonicMs,
  ) {
    this.rates = connectionRatesOf(limits, now);
    this.users = new UserConnections(limits.maxConnectionsPerUser ?? Infinity);
  }

  get connections(): number {
    return this.total;
  }

  /** Connection-rate entries kept (at most maxConnections). */
  get rateEntries(): number {
    return this.rates?.size ?? 0;
  }

  admit(upgrade: UpgradeRequest): Refusal | (() => void) {
    const origin = upgrade.headers.origin;
    // Browsers always send Origin; programs that send none are not subject to the browser's rules.
    if (origin !== undefined && !this.grantsCors(origin, upgrade.request)) {
      return { status: 403, message: 'Origin not allowed', reason: 'origin' };
    }
    if (this.total >= this.limits.maxConnections) {
      return {
        status: 503,
        message: 'Too many connections',
        reason: 'capacity',
        headers: { 'Retry-After': '5' },
      };
    }
    const ip = addressGroupOf(upgrade.transport, upgrade.remoteAddress);
    const fromIp = ip === undefined ? 0 : (this.perIp.get(ip) ?? 0);
    if (fromIp >= this.limits.maxConnectionsPerIp) {
      return {
        status: 429,
        message: 'Too many connections from this address',
        reason: 'ip-limit',
        headers: { 'Retry-After': '5' },
      };
    }
    const site = ip === undefined ? undefined : ipv6SiteOf(ip);
    const fromSite = site === undefined ? 0 : (this.perSite.get(site) ?? 0);
    if (fromSite >= (this.limits.maxConnectionsPerIpv6Site ?? Infinity)) {
      return {
        status: 429,
        message: 'Too many connections from this IPv6 /48',
        reason: 'ip-limit',
        headers: { 'Retry-After': '5' },
      };
    }
    const tooFast =
      ip !== undefined && keptConnection(upgrade.transport) ? this.takeToken(ip) : undefined;
    if (tooFast) return tooFast;
    this.total++;
    if (ip !== undefined) this.perIp.set(ip, fromIp + 1);
    if (site !== undefined) this.perSite.set(site, fromSite + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release(upgrade.transport, upgrade.remoteAddress);
    };
  }

  /**
   * Whether a session of `user` may open, checked once its user is known, in the same turn as
   * the session opens (so it counts before another is weighed): the refusal when the user has
   * limits.maxConnectionsPerUser sessions on this node already. A session without a user passes.
   */
  admitUser(user: string | undefined): Refusal | undefined {
    if (user === undefined || this.users.admits(user)) return undefined;
    return {
      status: 429,
      message: 'Too many connections for this user (maxConnectionsPerUser)',
      reason: 'user-limit',
      headers: { 'Retry-After': '5' },
    };
  }

  /**
   * Free the slot of a connection from `remoteAddress`. For a connection that became a session
   * the gateway calls this itself when the session closes (once), instead of keeping the
   * release closure and a 'close' listener alive for the whole life of every connection.
   */
  release(transport: TransportKind, remoteAddress: string | undefined): void {
    this.total--;
    const ip = addressGroupOf(transport, remoteAddress);
    if (ip === undefined) return;
    countDown(this.perIp, ip);
    const site = ipv6SiteOf(ip);
    if (site !== undefined) countDown(this.perSite, site);
    const entry = keptConnection(transport) ? this.rates?.peek(ip) : undefined;
    if (entry) this.rates!.release(entry);
  }

  /**
   * A kept connection from `group` takes a token, its entry held from here until `release`;
   * the refusal when there is none (nothing held then).
   */
  private takeToken(group: string): Refusal | undefined {
    const rates = this.rates;
    const entry = rates?.acquire(group);
    if (rates === undefined || entry === undefined || entry.take()) return undefined;
    const seconds = entry.retryAfterSeconds();
    rates.release(entry);
    return {
      status: 429,
      message: 'Too many new connections from this address',
      reason: 'ip-rate',
      headers: { 'Retry-After': String(seconds) },
    };
  }

  /**
   * Whether a page on `origin` may read the answers of the gateway's HTTP routes (CORS) to
   * `request`: the origins an upgrade is let in from, one on the allow-list, or without a list one
   * on the request's host (any port: a dev server beside the gateway; https when it came over TLS).
   * The one origin rule: upgrades are let in by it too (`request` undefined: TCP, stdio).
   */
  grantsCors(origin: string, request: IncomingMessage | undefined): boolean {
    if (this.origins !== undefined) return this.originAllowed(origin);
    return sameHost(origin, request?.headers.host, request !== undefined && this.overTls(request));
  }

  /**
   * Whether the CORS answers to a page granted (grantsCors) let it send credentials: not under
   * `["*"]`, which grants every page, a hostile one included, so that none reads an answer its
   * user's cookies bought. A list of origins, a predicate, and the same-host default name the
   * pages they trust, and grant them.
   */
  get grantsCredentials(): boolean {
    const policy = this.origins;
    return typeof policy === 'function' || policy?.[0] !== ANY_ORIGIN;
  }

  private originAllowed(origin: string): boolean {
    const policy = this.origins!;
    // Only `true`: a truthy answer that is no boolean (a promise from an async predicate) refuses.
    if (typeof policy === 'function') return policy(origin) === true;
    return policy[0] === ANY_ORIGIN || policy.includes(origin);
  }
}

export interface SocketLimits {
  /** Infinity: not bounded. */
  maxHttpSockets: number;
  /** Infinity: not bounded. */
  maxHttpSocketsPerIp: number;
  /** 0: no headers timer. */
  headersTimeoutMs: number;
}

/** Why the socket gate closed a socket (the metric's reason label, the log's). */
export type SocketCut = 'capacity' | 'ip-limit' | 'headers-timeout';

/** The sockets of one address group in a SocketGate. */
interface SocketGroup {
  readonly name: string;
  /** Its sockets counted (maxHttpSocketsPerIp). */
  count: number;
  /** Of them, those waiting on their client (SocketSlot.waiting). */
  waiting: number;
  /** The one waiting longest and the one waiting since last, the others linked between them in order. */
  oldest: SocketSlot | undefined;
  newest: SocketSlot | undefined;
}

interface SocketSlot {
  readonly socket: Socket;
  /** The address group it counts under; undefined: the total only (a pipe, a trusted proxy). */
  readonly group: SocketGroup | undefined;
  /** Peer and local address and port: how a TLS socket over this one finds it. */
  readonly tuple: string | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  held: boolean;
  /** Its requests whose headers are in and whose responses are not sent yet (pipelined: more than one). */
  underWay: number;
  /** Of them, those with a body not yet read to its end (the client's still to come, or unread). */
  unread: number;
  /** An upgrade's headers are in: the socket is handed over, or answered and closed; never waiting again. */
  upgraded: boolean;
  /**
   * Waiting on its client, so it may be cut to make room: no request under way on it, or only
   * requests whose bodies have not been read to their end. A socket waits from when it opens
   * until its first request's headers are in (or its TLS handshake is done), while its
   * requests' bodies are still to come, and again on a kept-alive connection once its last
   * response is sent, until the next request's headers are in. A request whose body has been
   * read (or that has none) is the server's to answer: its socket does not wait until it is
   * answered. In its group's list of waiting sockets (only a socket with a group is).
   */
  waiting: boolean;
  /** Its neighbours in that list: the one waiting since before it, and since after. */
  older: SocketSlot | undefined;
  newer: SocketSlot | undefined;
}

function tupleOf(socket: Socket): string | undefined {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (remoteAddress === undefined) return undefined;
  return `${remoteAddress}|${remotePort}|${localAddress}|${localPort}`;
}

/** Whether a request has a body to read: a Content-Length above 0, or a chunked one. */
function hasBody(request: IncomingMessage): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}

/**
 * The address groups of a SocketGate that hold sockets waiting on their clients, in tiers by
 * how many: one holding the most is found at once, however many groups there are. Within a
 * tier, the group that got there first comes first.
 */
class WaitingTiers {
  private readonly tiers = new Map<number, Set<SocketGroup>>();
  private top = 0;

  /** The most waiting sockets one group holds (0: none holds any). */
  get most(): number {
    return this.top;
  }

  /** A group holding `most` waiting sockets; undefined when none holds any. */
  get holdingMost(): SocketGroup | undefined {
    return this.tiers.get(this.top)?.values().next().value;
  }

  /** `group.waiting` went up by one. */
  grew(group: SocketGroup): void {
    const now = group.waiting;
    if (now > 1) this.leave(group, now - 1);
    this.enter(group, now);
    if (now > this.top) this.top = now;
  }

  /** `group.waiting` went down by one. */
  shrank(group: SocketGroup): void {
    const before = group.waiting + 1;
    this.leave(group, before);
    if (group.waiting > 0) this.enter(group, group.waiting);
    // The top tier emptied: `group`, one below it now, holds the most.
    if (before === this.top && !this.tiers.has(before)) this.top = group.waiting;
  }

  private enter(group: SocketGroup, waiting: number): void {
    let tier = this.tiers.get(waiting);
    if (tier === undefined) this.tiers.set(waiting, (tier = new Set()));
    tier.add(group);
  }

  private leave(group: SocketGroup, waiting: number): void {
    const tier = this.tiers.get(waiting)!;
    tier.delete(group);
    if (tier.size === 0) this.tiers.delete(waiting);
  }
}

/** Node's channels of its HTTP servers' requests: one's headers are in; its response is sent. */
const REQUEST_START = 'http.server.request.start';
const RESPONSE_FINISH = 'http.server.response.finish';

/** What a SocketGate is told of each request of a server it watches. */
interface RequestWatcher {
  started(socket: Duplex, request: IncomingMessage): void;
  finished(socket: Duplex, request: IncomingMessage): void;
}

/** What Node publishes on both channels (a response it sends itself, a 400, with a request too). */
interface RequestMessage {
  request: IncomingMessage;
  socket: Duplex;
  server: object;
}

/**
 * The watchers of each HTTP server's requests. Node publishes every request of every HTTP server
 * of the process on two diagnostics channels, with its socket and server (a response Node sends
 * itself, a 400 or a 417, included): one subscription to each, while any server is watched,
 * hands them to that server's watchers. The server gets no 'request' listener, which would
 * change what its own listeners (the application's, the hub's wrapper) see. A request the
 * gateway serves itself, beside Node's parser (servedAside), is handed to them the same way.
 */
class ServerRequests {
  private readonly watchers = new WeakMap<object, Set<RequestWatcher>>();
  private servers = 0;
  readonly started = (message: unknown): void => {
    const { request, socket, server } = message as RequestMessage;
    const watchers = this.watchers.get(server);
    if (watchers) for (const watcher of watchers) watcher.started(socket, request);
  };
  readonly finished = (message: unknown): void => {
    const { request, socket, server } = message as RequestMessage;
    const watchers = this.watchers.get(server);
    if (watchers) for (const watcher of watchers) watcher.finished(socket, request);
  };

  /** Tell `watcher` of `server`'s requests until the returned function is called. */
  watch(server: object, watcher: RequestWatcher): () => void {
    let watchers = this.watchers.get(server);
    if (watchers === undefined) {
      this.watchers.set(server, (watchers = new Set()));
      if (this.servers++ === 0) {
        subscribe(REQUEST_START, this.started);
        subscribe(RESPONSE_FINISH, this.finished);
      }
    }
    watchers.add(watcher);
    return () => {
      if (!watchers.delete(watcher) || watchers.size > 0) return;
      this.watchers.delete(server);
      if (--this.servers > 0) return;
      unsubscribe(REQUEST_START, this.started);
      unsubscribe(RESPONSE_FINISH, this.finished);
    };
  }
}

const serverRequests = new ServerRequests();

/**
 * A request of `server` that the gateway serves itself rather than through Node's parser (an
 * upgrade to another protocol answered as HTTP/1.1): the socket gates watching `server` are told
 * of it as of Node's own, its headers in now and its response sent at `response`'s 'finish', so
 * that its socket waits on its client while its body is still to come, as any request's does.
 */
export function servedAside(server: object, request: IncomingMessage, response: Writable): void {
  const message: RequestMessage = { request, socket: request.socket, server };
  serverRequests.started(message);
  response.once('finish', () => serverRequests.finished(message));
}

/**
 * The first door of the HTTP port, before a byte is read: sockets that are not WebSocket
 * sessions are bounded per address (by the same grouping as the per-IP limit; a trusted proxy's
 * sockets only in the total, since its clients are told apart by X-Forwarded-For, which comes
 * with the headers) and in total, and a socket that has not sent its first request's headers
 * within `headersTimeoutMs` of opening is destroyed. Without it a peer could hold every file
 * descriptor of the process with half-sent requests. A socket leaves the count when it closes,
 * or when it becomes a WebSocket session or carries a session's event stream (`handedOver`):
 * admission counts it from then on.
 *
 * With the total reached, a socket from an address (or a trusted proxy, which holds none of its
 * own) holding fewer sockets than another address holds waiting on their clients takes the
 * place of the socket waiting longest of the address holding the most waiting ones, which is
 * destroyed: so addresses that each stay within `maxHttpSocketsPerIp` cannot together keep
 * every other address out (or `/livez`), neither with half-sent requests, nor with requests
 * whose bodies never come (or wait unread behind a session's earlier POSTs), nor with
 * kept-alive connections left idle, or trickling their next request, after one quick request.
 * Otherwise it is destroyed itself. A socket whose request the server is answering (its body
 * read to its end, or none; its response not sent) is never cut for it.
 */
export class SocketGate {
  private total = 0;
  private readonly groups = new Map<string, SocketGroup>();
  private readonly waitingTiers = new WaitingTiers();
  private readonly bySocket = new WeakMap<object, SocketSlot>();
  /** Slots of TLS servers' raw sockets, by tuple: requests and upgrades see the TLS socket. */
  private readonly byTuple = new Map<string, SocketSlot>();
  /** The requests under way whose bodies are not read to their end yet, with their sockets' slots. */
  private readonly unreadBodies = new WeakMap<object, SocketSlot>();
  /** Shared by every socket (`this` is the socket): no closure per connection. */
  private readonly closed: (this: Socket) => void;
  /** Shared by every request with a body (`this` is the request): its body was read to its end. */
  private readonly bodyEnded: (this: IncomingMessage) => void;
  private readonly expired: (slot: SocketSlot) => void;
  private readonly requests: RequestWatcher = {
    started: (socket, request) => this.requestStarted(socket, request),
    finished: (socket, request) => this.responseSent(socket, request),
  };
  /** Watching stopped (`watch`'s returned function): a timer still running destroys nothing. */
  private stopped = false;

  constructor(
    private readonly limits: SocketLimits,
    private readonly proxies: { trusts(address: string | undefined): boolean } | undefined,
    /** Told of each socket the gate destroys, and why. */
    private readonly cut: (reason: SocketCut, remoteAddress: string | undefined) => void,
  ) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- `this` of the listeners is the socket, the request
    const gate = this;
    this.closed = function (this: Socket) {
      const slot = gate.bySocket.get(this);
      if (slot) gate.release(slot);
    };
    this.bodyEnded = function (this: IncomingMessage) {
      gate.bodyRead(this);
    };
    this.expired = (slot) => {
      slot.timer = undefined;
      if (!slot.held || this.stopped) return;
      this.cut('headers-timeout', slot.socket.remoteAddress);
      slot.socket.destroy();
    };
  }

  /** Sockets counted now (open, not WebSocket sessions). */
  get open(): number {
    return this.total;
  }

  /**
   * Count `server`'s sockets from its 'connection' event, and follow their requests (Node's
   * request channels, ServerRequests). Works on an http or https server (the gateway's own or
   * the application's). Whoever reads the server's requests and upgrades calls `headersRead`
   * (the gateway, for all of them, taken by it or not) and `handedOver`. Returns what stops
   * watching; the gate is then done with (a timer still running destroys nothing).
   */
  watch(server: NetServer): () => void {
    const tls = server instanceof TlsServer;
    const onConnection = (socket: Socket): void => this.connection(socket, tls);
    server.on('connection', onConnection);
    const unwatchRequests = serverRequests.watch(server, this.requests);
    return () => {
      server.off('connection', onConnection);
      unwatchRequests();
      this.stopped = true;
    };
  }

  /**
   * The TLS listener of `listenTcp`: a socket counts (in the same bounds) until its handshake is
   * done, and is destroyed if that takes longer than `headersTimeoutMs`; admission counts it
   * from then on. (tls' own `handshakeTimeout` does not close the TCP connection.)
   */
  watchTlsListener(server: TlsServer): void {
    server.on('connection', (socket: Socket) => this.connection(socket, true));
    server.on('secureConnection', (socket: Duplex) => this.handedOver(socket));
  }

  private connection(socket: Socket, tls: boolean): void {
    const address = socket.remoteAddress;
    const name =
      address === undefined || this.proxies?.trusts(address) ? undefined : addressGroup(address);
    const group = name === undefined ? undefined : this.groups.get(name);
    const fromGroup = group?.count ?? 0;
    const refusal: SocketCut | undefined =
      fromGroup >= this.limits.maxHttpSocketsPerIp
        ? 'ip-limit'
        : this.total >= this.limits.maxHttpSockets && !this.displaceFor(fromGroup)
          ? 'capacity'
          : undefined;
    if (refusal) {
      this.cut(refusal, address);
      socket.destroy();
      return;
    }
    this.total++;
    const slot: SocketSlot = {
      socket,
      group: name === undefined ? undefined : (group ?? this.newGroup(name)),
      tuple: tls ? tupleOf(socket) : undefined,
      timer: undefined,
      held: true,
      underWay: 0,
      unread: 0,
      upgraded: false,
      waiting: false,
      older: undefined,
      newer: undefined,
    };
    if (slot.group) {
      slot.group.count++;
      this.addWaiting(slot, slot.group);
    }
    if (this.limits.headersTimeoutMs > 0) {
      slot.timer = setTimeout(this.expired, this.limits.headersTimeoutMs, slot);
      slot.timer.unref();
    }
    this.bySocket.set(socket, slot);
    if (slot.tuple !== undefined) this.byTuple.set(slot.tuple, slot);
    socket.once('close', this.closed);
  }

  private newGroup(name: string): SocketGroup {
    const group: SocketGroup = {
      name,
      count: 0,
      waiting: 0,
      oldest: undefined,
      newest: undefined,
    };
    this.groups.set(name, group);
    return group;
  }

  /**
   * The total is reached and a socket comes from an address holding `held` sockets: make room
   * for it by destroying the socket waiting longest of the address holding the most waiting on
   * their clients, when that address holds more waiting ones than `held`. Whether room was made.
   */
  private displaceFor(held: number): boolean {
    const tiers = this.waitingTiers;
    if (tiers.most <= held) return false;
    const oldest = tiers.holdingMost!.oldest!;
    this.cut('capacity', oldest.socket.remoteAddress);
    // Counted out now, so that the newcomer counts within the total; its 'close' comes later.
    this.release(oldest);
    oldest.socket.destroy();
    return true;
  }

  /** `slot` began to wait on its client: last in its group's list, the first to go after those waiting longer. */
  private addWaiting(slot: SocketSlot, group: SocketGroup): void {
    slot.waiting = true;
    slot.older = group.newest;
    if (group.newest) group.newest.newer = slot;
    else group.oldest = slot;
    group.newest = slot;
    group.waiting++;
    this.waitingTiers.grew(group);
  }

  /** `slot` no longer waits on its client: the server answers a request of it, or it left the count. */
  private removeWaiting(slot: SocketSlot): void {
    const group = slot.group;
    if (!slot.waiting || group === undefined) return;
    slot.waiting = false;
    if (slot.older) slot.older.newer = slot.newer;
    else group.oldest = slot.newer;
    if (slot.newer) slot.newer.older = slot.older;
    else group.newest = slot.older;
    slot.older = slot.newer = undefined;
    group.waiting--;
    this.waitingTiers.shrank(group);
  }

  /**
   * Put `slot` in its group's list, or take it out, as it now waits on its client or not. One
   * that goes on waiting keeps its place (a request whose body is to come, on a socket waiting
   * since its last response, waits on since then).
   */
  private reconsider(slot: SocketSlot): void {
    const group = slot.group;
    if (group === undefined || !slot.held) return;
    const waits = !slot.upgraded && slot.underWay === slot.unread;
    if (waits && !slot.waiting) this.addWaiting(slot, group);
    else if (!waits) this.removeWaiting(slot);
  }

  private slotOf(socket: Duplex): SocketSlot | undefined {
    const slot = this.bySocket.get(socket);
    if (slot || this.byTuple.size === 0) return slot;
    const tuple = tupleOf(socket as Socket);
    return tuple === undefined ? undefined : this.byTuple.get(tuple);
  }

  /**
   * A request's or an upgrade's headers are in on `socket`: no headers timer. With no request
   * under way on it (Node's channel tells of requests first), they are an upgrade's.
   */
  headersRead(socket: Duplex): void {
    const slot = this.slotOf(socket);
    if (slot === undefined) return;
    this.stopHeadersTimer(slot);
    if (slot.underWay > 0) return;
    slot.upgraded = true;
    this.reconsider(slot);
  }

  private stopHeadersTimer(slot: SocketSlot): void {
    if (slot.timer === undefined) return;
    clearTimeout(slot.timer);
    slot.timer = undefined;
  }

  /**
   * A request's headers are in on `socket` (Node's channel): under way until its response is
   * sent. Its socket waits on its client on while the request's body is to be read.
   */
  private requestStarted(socket: Duplex, request: IncomingMessage): void {
    const slot = this.slotOf(socket);
    if (slot === undefined || !slot.held) return;
    slot.underWay++;
    this.stopHeadersTimer(slot);
    if (hasBody(request)) {
      slot.unread++;
      this.unreadBodies.set(request, slot);
      request.once('end', this.bodyEnded);
    }
    this.reconsider(slot);
  }

  /** `request`'s body was read to its end: the server has all of it, and answers it. */
  private bodyRead(request: IncomingMessage): void {
    const slot = this.unreadBodies.get(request);
    if (slot === undefined) return;
    this.unreadBodies.delete(request);
    slot.unread--;
    this.reconsider(slot);
  }

  /**
   * `request`'s response on `socket` is sent (Node's channel): with no other request under way
   * the socket, kept alive, waits for its next request. (One about to close waits until its
   * 'close'.) A body left unread is Node's to discard.
   */
  private responseSent(socket: Duplex, request: IncomingMessage): void {
    const slot = this.slotOf(socket);
    if (slot === undefined || slot.underWay === 0) return;
    slot.underWay--;
    if (this.unreadBodies.get(request) === slot) {
      this.unreadBodies.delete(request);
      request.off('end', this.bodyEnded);
      slot.unread--;
    }
    this.reconsider(slot);
  }

  /**
   * The socket became a WebSocket session, or carries a session's event stream: it counts
   * against the connection limits now. Idempotent: a socket no longer counted is left alone.
   */
  handedOver(socket: Duplex): void {
    const slot = this.slotOf(socket);
    if (slot) this.release(slot);
  }

  private release(slot: SocketSlot): void {
    if (!slot.held) return;
    slot.held = false;
    clearTimeout(slot.timer);
    slot.timer = undefined;
    this.removeWaiting(slot);
    // Nothing of the gate stays with a socket that became a session (held as long as it is open).
    this.bySocket.delete(slot.socket);
    slot.socket.removeListener('close', this.closed);
    this.total--;
    const group = slot.group;
    if (group !== undefined && --group.count === 0) this.groups.delete(group.name);
    if (slot.tuple !== undefined && this.byTuple.get(slot.tuple) === slot) {
      this.byTuple.delete(slot.tuple);
    }
  }
}
