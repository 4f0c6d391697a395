// The `upstreams` and `methods` sections of a gateway-mode configuration file, checked and
// resolved with the rules every option of the library uses (src/peer/option-rules.ts): each
// refusal names the option's full path in the file and what it may be.
import { isReservedMethod } from '../protocol/reserved.js';
import { NATS_URL_SCHEME, natsServerOptions } from '../pubsub/nats-servers.js';
import { checkOptions, isRecord, numberIn, ofType, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';

/** The longest delay a Node timer takes (2^31 - 1 ms). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** Defaults of an upstream's options. */
export const upstreamDefaults = Object.freeze({
  timeoutMs: 10_000,
  maxConcurrent: 64,
  retries: 0,
});

/**
 * One session's share of an upstream unless `maxConcurrentPerSession` is given: an eighth of its
 * maxConcurrent, at least 1 (8 of the default 64), so one connection cannot take every slot.
 */
export function defaultMaxConcurrentPerSession(maxConcurrent: number): number {
  return Math.max(1, Math.floor(maxConcurrent / 8));
}

/**
 * One client address's share of an upstream unless `maxConcurrentPerAddress` is given: a quarter
 * of its maxConcurrent (16 of the default 64), so a few connections from one address (each within
 * its session's share) cannot take every slot; never below the session's share, which a single
 * connection of the address may take.
 */
export function defaultMaxConcurrentPerAddress(maxConcurrent: number, perSession: number): number {
  return Math.max(perSession, 1, Math.floor(maxConcurrent / 4));
}

/**
 * One user's share of an upstream unless `maxConcurrentPerUser` is given: as an address's, a
 * quarter of its maxConcurrent (16 of the default 64), so a user's connections from many addresses
 * (each within its session's and its address's share) cannot take every slot; never below the
 * session's share, which a single connection of the user may take.
 */
export function defaultMaxConcurrentPerUser(maxConcurrent: number, perSession: number): number {
  return defaultMaxConcurrentPerAddress(maxConcurrent, perSession);
}

/**
 * The slots of an upstream kept for new callers unless `reservedForNewCallers` is given: an eighth
 * of its maxConcurrent (8 of the default 64; none below 8), so callers at their full shares leave
 * room for one that has no call in flight.
 */
export function defaultReservedForNewCallers(maxConcurrent: number): number {
  return Math.floor(maxConcurrent / 8);
}

export const upstreamBounds = Object.freeze({
  maxConcurrent: 100_000,
  retries: 5,
  /** As maxConcurrent's: an HTTP upstream's connections are at least its maxConcurrent. */
  connections: 100_000,
});

interface UpstreamCommon {
  readonly name: string;
  readonly timeoutMs: number;
  readonly maxConcurrent: number;
  /** Of maxConcurrent, what one session's calls may hold at once (at most maxConcurrent). */
  readonly maxConcurrentPerSession: number;
  /**
   * Of maxConcurrent, what the calls of all sessions from one client address group (IPv6: its
   * /64) may hold at once: at least maxConcurrentPerSession, at most maxConcurrent.
   */
  readonly maxConcurrentPerAddress: number;
  /**
   * Of maxConcurrent, what the calls of all sessions of one authenticated user (`Session.user`,
   * whatever their addresses) may hold at once: at least maxConcurrentPerSession, at most
   * maxConcurrent. Anonymous sessions are not counted under it.
   */
  readonly maxConcurrentPerUser: number;
  /**
   * Of maxConcurrent, the slots only a call of a caller with none in flight (its session, address
   * group and user) may take: below maxConcurrent.
   */
  readonly reservedForNewCallers: number;
  readonly retries: number;
}

export interface HttpUpstreamConfig extends UpstreamCommon {
  readonly kind: 'http';
  /** The JSON-RPC endpoint requests are POSTed to. */
  readonly url: string;
  /**
   * The most sockets of the upstream's pool: at least maxConcurrent (its default), so every call
   * admitted has one (see resolveConnections).
   */
  readonly connections: number;
  /** Sent with every request (a key the upstream checks, say). */
  readonly headers: Readonly<Record<string, string>>;
}

export interface NatsUpstreamConfig extends UpstreamCommon {
  readonly kind: 'nats';
  readonly servers: readonly string[];
  readonly subject: string;
}

export type UpstreamConfig = HttpUpstreamConfig | NatsUpstreamConfig;

export interface RouteConfig {
  /** An exact method name, or a prefix ending in `*` (`orders.*`, `*`). */
  readonly pattern: string;
  readonly upstream: string;
  /** The route's own timeout, else the upstream's. */
  readonly timeoutMs: number;
  /** Safe to send again after a timeout or an unavailable upstream. */
  readonly idempotent: boolean;
}

export interface UpstreamsConfig {
  readonly upstreams: ReadonlyMap<string, UpstreamConfig>;
  readonly routes: readonly RouteConfig[];
}

const timeoutRule = numberIn(1, MAX_DELAY_MS, true);

const upstreamRules: Record<string, Rule> = {
  url: httpUrl,
  nats: ofType('object', 'an object ({ url, subject })'),
  timeoutMs: timeoutRule,
  maxConcurrent: numberIn(1, upstreamBounds.maxConcurrent, true),
  maxConcurrentPerSession: numberIn(1, upstreamBounds.maxConcurrent, true),
  maxConcurrentPerAddress: numberIn(1, upstreamBounds.maxConcurrent, true),
  maxConcurrentPerUser: numberIn(1, upstreamBounds.maxConcurrent, true),
  reservedForNewCallers: numberIn(0, upstreamBounds.maxConcurrent, true),
  retries: numberIn(0, upstreamBounds.retries, true),
  connections: numberIn(1, upstreamBounds.connections, true),
  headers: headerRecord,
};

const natsRules: Record<string, Rule> = {
  url: natsServers,
  subject: subjectRule,
};

const routeRules: Record<string, Rule> = {
  upstream: ofType('string', 'the name of an upstream'),
  timeoutMs: timeoutRule,
  idempotent: ofType('boolean'),
};

/**
 * Check and resolve `{ upstreams, methods }` (other keys of `value` are left to their owners).
 * Every route names a declared upstream; an upstream no route names is allowed (hooks use them).
 */
export function resolveUpstreamsConfig(value: unknown): UpstreamsConfig {
  if (!isRecord(value)) refuse('the configuration', 'an object', value);
  const upstreams = new Map<string, UpstreamConfig>();
  const declared = value['upstreams'];
  if (declared !== undefined) {
    if (!isRecord(declared)) refuse('upstreams', 'an object of upstreams by name', declared);
    for (const [name, options] of Object.entries(declared)) {
      upstreams.set(name, resolveUpstream(name, options));
    }
  }
  const routes: RouteConfig[] = [];
  const methods = value['methods'];
  if (methods !== undefined) {
    if (!isRecord(methods)) refuse('methods', 'an object of routes by method name', methods);
    for (const [pattern, route] of Object.entries(methods)) {
      routes.push(resolveRoute(pattern, route, upstreams));
    }
  }
  return { upstreams, routes };
}

function resolveUpstream(name: string, options: unknown): UpstreamConfig {
  const path = `upstreams.${name}`;
  if (!isRecord(options)) refuse(path, 'an object ({ url } or { nats })', options);
  const given = checkOptions(options, upstreamRules, `${path}.`, 'an upstream');
  const connections = given['connections'] as number | undefined;
  // An HTTP upstream given fewer sockets than the default calls in flight, and no maxConcurrent,
  // admits as many calls as it has sockets: a file that sets only `connections` keeps loading,
  // and each call admitted still has a socket of its own.
  const maxConcurrent =
    (given['maxConcurrent'] as number | undefined) ??
    Math.min(upstreamDefaults.maxConcurrent, connections ?? Infinity);
  const { perSession, perAddress, perUser } = resolveShares(path, given, maxConcurrent);
  const common = {
    name,
    timeoutMs: (given['timeoutMs'] as number | undefined) ?? upstreamDefaults.timeoutMs,
    maxConcurrent,
    maxConcurrentPerSession: perSession,
    maxConcurrentPerAddress: perAddress,
    maxConcurrentPerUser: perUser,
    reservedForNewCallers: resolveReserve(path, given, maxConcurrent),
    retries: (given['retries'] as number | undefined) ?? upstreamDefaults.retries,
  };
  if ((given['url'] === undefined) === (given['nats'] === undefined)) {
    throw new TypeError(
      `${path} must have either url (HTTP) or nats, not ${given['url'] === undefined ? 'neither' : 'both'}`,
    );
  }
  if (given['nats'] !== undefined) {
    for (const key of ['connections', 'headers']) {
      if (given[key] !== undefined)
        throw new TypeError(`${path}.${key} applies to HTTP upstreams only`);
    }
    const nats = checkOptions(given['nats'], natsRules, `${path}.nats.`, 'a NATS upstream');
    for (const key of ['url', 'subject']) {
      if (nats[key] === undefined) throw new TypeError(`${path}.nats.${key} is required`);
    }
    const url = nats['url'] as string | string[];
    return {
      ...common,
      kind: 'nats',
      servers: Object.freeze(typeof url === 'string' ? [url] : [...url]),
      subject: nats['subject'] as string,
    };
  }
  return {
    ...common,
    kind: 'http',
    url: given['url'] as string,
    connections: resolveConnections(path, connections, maxConcurrent),
    headers: Object.freeze({ ...((given['headers'] as Record<string, string> | undefined) ?? {}) }),
  };
}

/** The slots kept for new callers: fewer than maxConcurrent, so a caller calling gets some. */
function resolveReserve(
  path: string,
  given: Record<string, unknown>,
  maxConcurrent: number,
): number {
  const reserve = given['reservedForNewCallers'] as number | undefined;
  if (reserve === undefined) return defaultReservedForNewCallers(maxConcurrent);
  if (reserve >= maxConcurrent) {
    throw new RangeError(
      `${path}.reservedForNewCallers must be below maxConcurrent (${maxConcurrent}), not ${reserve}`,
    );
  }
  return reserve;
}

/**
 * A session's, an address's and a user's shares of `maxConcurrent`: perSession <= perAddress <=
 * maxConcurrent and perSession <= perUser <= maxConcurrent (a network session always counts
 * under its address, and an authenticated one under its user, so a larger session share could
 * never be used). Whichever is not given defaults within the others.
 */
function resolveShares(
  path: string,
  given: Record<string, unknown>,
  maxConcurrent: number,
): { perSession: number; perAddress: number; perUser: number } {
  const session = given['maxConcurrentPerSession'] as number | undefined;
  const address = given['maxConcurrentPerAddress'] as number | undefined;
  const user = given['maxConcurrentPerUser'] as number | undefined;
  for (const [key, value] of [
    ['maxConcurrentPerSession', session],
    ['maxConcurrentPerAddress', address],
    ['maxConcurrentPerUser', user],
  ] as const) {
    if (value !== undefined && value > maxConcurrent) {
      throw new RangeError(
        `${path}.${key} must be at most maxConcurrent (${maxConcurrent}), not ${value}`,
      );
    }
  }
  if (session !== undefined) {
    for (const [key, value] of [
      ['maxConcurrentPerAddress', address],
      ['maxConcurrentPerUser', user],
    ] as const) {
      if (value !== undefined && session > value) {
        throw new RangeError(
          `${path}.maxConcurrentPerSession must be at most ${key} (${value}), not ${session}`,
        );
      }
    }
  }
  const perSession =
    session ??
    Math.min(
      defaultMaxConcurrentPerSession(maxConcurrent),
      address ?? maxConcurrent,
      user ?? maxConcurrent,
    );
  return {
    perSession,
    perAddress: address ?? defaultMaxConcurrentPerAddress(maxConcurrent, perSession),
    perUser: user ?? defaultMaxConcurrentPerUser(maxConcurrent, perSession),
  };
}

/**
 * An HTTP upstream's pool sockets: `maxConcurrent` unless given, and never fewer. The shares
 * (session, address, user) are promises about slots, and a slot is a socket only when the pool
 * has one for every call admitted: with fewer, one address's calls within its share (say 16 the
 * upstream never answers) could hold every socket, and a call admitted for another address would
 * wait in the pool's queue for one of them until its timeout. With pipelining 1 (two requests
 * never share a socket, so none waits behind another's slow answer), as many sockets as calls
 * admitted means no admitted call ever waits for a socket. Idle ones close after undici's
 * keep-alive timeout, so the sockets open follow the calls in flight.
 */
function resolveConnections(
  path: string,
  connections: number | undefined,
  maxConcurrent: number,
): number {
  if (connections === undefined) return maxConcurrent;
  if (connections < maxConcurrent) {
    throw new RangeError(
      `${path}.connections must be at least maxConcurrent (${maxConcurrent}), not ${connections}: each call admitted needs a pool socket of its own, else the calls of one client address can hold every socket while the calls admitted for others wait (lower maxConcurrent to keep fewer sockets)`,
    );
  }
  return connections;
}

function resolveRoute(
  pattern: string,
  route: unknown,
  upstreams: ReadonlyMap<string, UpstreamConfig>,
): RouteConfig {
  const path = `methods.${pattern}`;
  const star = pattern.indexOf('*');
  if (pattern === '' || (star !== -1 && star !== pattern.length - 1)) {
    throw new TypeError(
      `${path}: a route is an exact method name or a prefix ending in "*", not ${JSON.stringify(pattern)}`,
    );
  }
  if (isReservedMethod(pattern)) {
    throw new TypeError(`${path}: method names starting with "rpc." are reserved`);
  }
  const given =
    typeof route === 'string'
      ? { upstream: route }
      : isRecord(route)
        ? checkOptions(route, routeRules, `${path}.`, 'a route')
        : refuse(
            path,
            'the name of an upstream or an object ({ upstream, timeoutMs, idempotent })',
            route,
          );
  const name = given['upstream'];
  if (name === undefined) throw new TypeError(`${path}.upstream is required`);
  const upstream = upstreams.get(name as string);
  if (!upstream) {
    const known = [...upstreams.keys()].map((n) => `"${n}"`).join(', ');
    throw new RangeError(
      `${typeof route === 'string' ? path : `${path}.upstream`} must name an upstream (${known || 'none is declared'}), not ${JSON.stringify(name)}`,
    );
  }
  return Object.freeze({
    pattern,
    upstream: upstream.name,
    timeoutMs: (given['timeoutMs'] as number | undefined) ?? upstream.timeoutMs,
    idempotent: (given['idempotent'] as boolean | undefined) ?? false,
  });
}

function httpUrl(value: unknown, name: string): void {
  if (typeof value !== 'string') refuse(name, 'an http(s) URL', value);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refuse(name, 'an http(s) URL', value, true);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    refuse(name, 'an http(s) URL', value, true);
  if (url.username || url.password)
    refuse(name, 'an http(s) URL without credentials (use headers)', value, true);
}

function natsServers(value: unknown, name: string): void {
  const list = typeof value === 'string' ? [value] : value;
  if (
    !Array.isArray(list) ||
    list.length === 0 ||
    list.some((s) => typeof s !== 'string' || !NATS_URL_SCHEME.test(s) || !URL.canParse(s))
  ) {
    refuse(name, 'a nats:// or tls:// URL or a non-empty array of them', value, true);
  }
  try {
    natsServerOptions(list as string[]);
  } catch (err) {
    throw new TypeError(`${name}: ${(err as Error).message}`, { cause: err });
  }
}

function subjectRule(value: unknown, name: string): void {
  if (typeof value !== 'string' || !/^[^\s*>]+$/.test(value) || value.split('.').includes('')) {
    refuse(name, 'a NATS subject without wildcards or spaces', value, typeof value === 'string');
  }
}

/**
 * Headers a request's framing or its connection decides (RFC 9110 §7.6.1, §8.6, §10.1.1): the
 * HTTP client sets them per request, and refuses a request that names them (every call would
 * fail -32011 "connection failed").
 */
const PER_REQUEST_HEADERS = new Set([
  'connection',
  'content-length',
  'expect',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** A header's name and value as HTTP takes them (RFC 9110 token; visible ASCII and spaces). */
function headerRecord(value: unknown, name: string): void {
  if (!isRecord(value)) refuse(name, 'an object of header names to strings', value);
  for (const [header, text] of Object.entries(value)) {
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(header))
      refuse(`${name}.${header}`, 'a valid header name', header, true);
    if (PER_REQUEST_HEADERS.has(header.toLowerCase())) {
      refuse(
        `${name}.${header}`,
        'left out: it is set for each request by the HTTP client (framing or connection)',
        header,
        true,
      );
    }
    if (typeof text !== 'string' || !/^[\t\x20-\x7e]*$/.test(text))
      refuse(`${name}.${header}`, 'a string of visible ASCII', text);
  }
}
