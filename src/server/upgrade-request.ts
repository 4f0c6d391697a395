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

/** Why a WebSocket handshake is malformed: the answer `ws` would give it. */
export interface HandshakeFault {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** A Sec-WebSocket-Key as RFC 6455 has it: 16 bytes in base64. */
const HANDSHAKE_KEY = /^[+/0-9A-Za-z]{22}==$/;

/**
 * What `ws`'s handleUpgrade would refuse in `request`, with the status and text it would answer,
 * and what RFC 6455 refuses that ws takes (HTTP/1.0, no Host, a body), or undefined when the
 * handshake is well formed. Checked before admission and `authenticate`,
 * so a malformed request takes no connection slot, spends no hook call, and is counted and logged
 * as every other refusal is (ws answers its own refusals without telling anyone).
 */
export function handshakeFault(request: IncomingMessage): HandshakeFault | undefined {
  const { headers } = request;
  if (request.method !== 'GET') {
    return { status: 405, message: 'Invalid HTTP method', headers: { Allow: 'GET' } };
  }
  // RFC 6455 4.1: an HTTP/1.1 (or later) GET with a Host header. What follows an upgrade's head
  // is WebSocket frames: a body would be read as frames and break the protocol at once.
  const { httpVersionMajor: major, httpVersionMinor: minor } = request;
  if (major < 1 || (major === 1 && minor < 1)) {
    return { status: 400, message: 'WebSocket needs HTTP/1.1 or later' };
  }
  if (headers.host === undefined) return { status: 400, message: 'Missing Host header' };
  const length = headers['content-length'];
  if (headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
    return { status: 400, message: 'An upgrade request has no body' };
  }
  if (headers.upgrade?.toLowerCase() !== 'websocket') {
    return { status: 400, message: 'Invalid Upgrade header' };
  }
  const key = headers['sec-websocket-key'];
  if (key === undefined || !HANDSHAKE_KEY.test(key)) {
    return { status: 400, message: 'Missing or invalid Sec-WebSocket-Key header' };
  }
  // ws speaks 13 (RFC 6455) and 8 (the last draft, the same framing).
  const version = Number(headers['sec-websocket-version']);
  if (version !== 13 && version !== 8) {
    return {
      status: 400,
      message: 'Missing or invalid Sec-WebSocket-Version header',
      headers: { 'Sec-WebSocket-Version': '13, 8' },
    };
  }
  const protocols = headers['sec-websocket-protocol'];
  if (protocols !== undefined && !wellFormedProtocols(protocols)) {
    return { status: 400, message: 'Invalid Sec-WebSocket-Protocol header' };
  }
  return undefined;
}

/** RFC 7230 tchar: the characters of a token. */
const TOKEN_CHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]$/;

/**
 * Whether a Sec-WebSocket-Protocol value is what ws's parser takes: tokens separated by commas,
 * spaces or tabs around them (not first), none empty, none twice.
 */
function wellFormedProtocols(value: string): boolean {
  const seen = new Set<string>();
  let start = -1;
  let end = -1;
  for (let i = 0; i < value.length; i++) {
    const char = value[i]!;
    if (end === -1 && TOKEN_CHAR.test(char)) {
      if (start === -1) start = i;
    } else if (i !== 0 && (char === ' ' || char === '\t')) {
      if (end === -1 && start !== -1) end = i;
    } else if (char === ',') {
      if (start === -1) return false;
      const protocol = value.slice(start, end === -1 ? i : end);
      if (seen.has(protocol)) return false;
      seen.add(protocol);
      start = end = -1;
    } else {
      return false;
    }
  }
  // As ws: the value ends with a token (no comma, no whitespace after it).
  return start !== -1 && end === -1 && !seen.has(value.slice(start));
}
