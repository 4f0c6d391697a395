import type { IncomingMessage } from 'node:http';
import type { TrustedProxies } from './client-address.js';
import type { UpgradeRequest } from './options.js';

/**
 * The Cookie header as name -> value. A name sent twice keeps its first value, as browsers'
 * own parsers and the `cookie` package do (a browser sends the longest path first, then the
 * oldest): a cookie tossed in later from a sibling subdomain (`Domain=.example.com`) does not
 * override the site's own. Only a `__Host-` cookie cannot be tossed at all.
 */
function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = Object.create(null) as Record<string, string>;
  if (!header) return cookies;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name in cookies) continue;
    const raw = part.slice(eq + 1).trim();
    try {
      cookies[name] = decodeURIComponent(raw);
    } catch {
      cookies[name] = raw;
    }
  }
  return cookies;
}

/**
 * What the authenticate hook sees of an HTTP request (upgrade or POST). `remoteAddress` is the
 * client's, through trusted proxies' X-Forwarded-For (see TrustedProxies), else the socket's peer.
 */
export function describeUpgrade(
  request: IncomingMessage,
  transport: 'websocket' | 'http' | 'sse' = 'websocket',
  proxies?: TrustedProxies,
): UpgradeRequest {
  const url = new URL(request.url ?? '/', 'http://localhost');
  const offered = request.headers['sec-websocket-protocol'];
  return {
    transport,
    request,
    headers: request.headers,
    url,
    query: url.searchParams,
    cookies: parseCookies(request.headers.cookie),
    protocols: offered
      ? offered
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean)
      : [],
    remoteAddress: proxies ? proxies.clientAddress(request) : request.socket.remoteAddress,
    token: bearerToken(request.headers.authorization),
    phase: 'upgrade',
  };
}

/** The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive). */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/** What a TCP or stdio connection can tell about itself: no headers, no URL. */
export function describeStream(
  transport: 'tcp' | 'stdio',
  remoteAddress: string | undefined,
): UpgradeRequest {
  return {
    transport,
    request: undefined,
    headers: {},
    url: new URL(`${transport}://${remoteAddress ?? 'local'}/`),
    query: new URLSearchParams(),
    cookies: {},
    protocols: [],
    remoteAddress,
    token: undefined,
    phase: 'upgrade',
  };
}
