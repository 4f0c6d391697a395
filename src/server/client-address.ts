import { BlockList, isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { cut } from '../peer/option-rules.js';

const MAPPED_V4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** `::ffff:1.2.3.4` (how a dual-stack socket reports an IPv4 peer) as `1.2.3.4`; others as they are. */
function normalize(address: string): string {
  return MAPPED_V4.exec(address)?.[1] ?? address;
}

/** One X-Forwarded-For entry as a bare address: ports and IPv6 brackets removed; undefined if not an IP. */
function forwardedAddress(entry: string): string | undefined {
  let address = entry.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed) address = bracketed[1]!;
  else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d+$/.test(address)) address = address.split(':', 1)[0]!;
  return isIP(address) === 0 ? undefined : normalize(address);
}

/**
 * A warning for each entry of `trustedProxies` with a prefix length of 0 (`0.0.0.0/0`, `::/0`):
 * every peer's X-Forwarded-For believed. Allowed, since a setup may mean it (a gateway reached
 * only through proxies, on a network nothing else reaches), but almost never meant.
 */
export function everyPeerWarnings(entries: readonly string[]): string[] {
  return entries
    .filter((entry) => /\/0{1,3}$/.test(entry.trim()))
    .map(
      (entry) =>
        `trustedProxies: "${cut(entry)}" trusts every peer's X-Forwarded-For, so any client can claim any address (per-address limits, rate buckets, logs); list the proxies' own addresses or subnets`,
    );
}

/**
 * Which peers are proxies whose X-Forwarded-For header is believed (`trustedProxies`), and
 * the client address that follows from it. Entries are addresses or CIDR subnets, IPv4 or
 * IPv6 (`10.0.0.0/8`, `::1`, `fd00::/8`); an entry that is neither throws at construction.
 */
export class TrustedProxies {
  private readonly list = new BlockList();
  readonly size: number;

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = raw.trim();
      const slash = entry.indexOf('/');
      const address = slash < 0 ? normalize(entry) : entry.slice(0, slash);
      let family = isIP(address);
      const prefixText = slash < 0 ? undefined : entry.slice(slash + 1);
      // Digits only: Number('') is 0, and "10.0.0.0/" must not trust every address.
      if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) family = 0;
      const prefix = prefixText === undefined ? undefined : Number(prefixText);
      const maxPrefix = family === 6 ? 128 : 32;
      if (
        family === 0 ||
        (prefix !== undefined && !(Number.isInteger(prefix) && prefix >= 0 && prefix <= maxPrefix))
      ) {
        throw new TypeError(
          `trustedProxies: "${raw}" is not an IP address or CIDR subnet (e.g. 10.0.0.0/8, fd00::/8)`,
        );
      }
      const type = family === 6 ? 'ipv6' : 'ipv4';
      if (prefix === undefined) this.list.addAddress(address, type);
      else this.list.addSubnet(address, prefix, type);
    }
    this.size = entries.length;
  }

  /** Whether `address` (as a socket reports it) is one of the trusted proxies. */
  trusts(address: string | undefined): boolean {
    if (address === undefined || this.size === 0) return false;
    const bare = normalize(address);
    const family = isIP(bare);
    if (family === 0) return false;
    return this.list.check(bare, family === 6 ? 'ipv6' : 'ipv4');
  }

  /**
   * The client's address: the socket's peer, unless that peer is a trusted proxy; then the
   * right-most X-Forwarded-For entry that is not itself a trusted proxy (entries further left
   * were written by the client or untrusted hops, and could be anything). When every entry is
   * trusted, the left-most; when an entry is not an address, the last trusted hop before it.
   */
  clientAddress(request: IncomingMessage): string | undefined {
    const peer = request.socket.remoteAddress;
    if (!this.trusts(peer)) return peer;
    const header = request.headers['x-forwarded-for'];
    if (header === undefined) return peer;
    const entries = (Array.isArray(header) ? header.join(',') : header).split(',');
    let nearest = normalize(peer!);
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i]!.trim() === '') continue;
      const address = forwardedAddress(entries[i]!);
      if (address === undefined) return nearest;
      if (!this.trusts(address)) return address;
      nearest = address;
    }
    return nearest;
  }
}

/**
 * Whether the browser sent `request` over TLS: the socket is TLS, or it came from a trusted proxy
 * whose `X-Forwarded-Proto` says `https` or `wss` (its first entry: the scheme the client used, as the
 * proxy in front of the others wrote it). A plain request from elsewhere may still have been TLS
 * up to a proxy the gateway does not know of: that is "not known to be", and false.
 */
export function sentOverTls(
  request: IncomingMessage,
  proxies: TrustedProxies | undefined,
): boolean {
  if ((request.socket as { encrypted?: boolean }).encrypted === true) return true;
  if (!proxies?.trusts(request.socket.remoteAddress)) return false;
  const header = request.headers['x-forwarded-proto'];
  const first = (Array.isArray(header) ? header[0] : header)?.split(',', 1)[0];
  const proto = first?.trim().toLowerCase();
  // Traefik names a WebSocket upgrade's scheme as the browser wrote it: wss.
  return proto === 'https' || proto === 'wss';
}
