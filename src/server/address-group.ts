import { isIP } from 'node:net';
import type { TransportKind } from '../transport/transport.js';

/**
 * What per-address limits count under. IPv4: the address. IPv6: its /64 prefix, since one
 * subscriber (a home, a VM) is given at least a whole /64 and can pick a new address in it for
 * each connection; counting single IPv6 addresses would let it step around the limit. Many are
 * given more (a /56 or a /48: ipv6SiteOf). IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`, however
 * written) count as their IPv4 address, and so do addresses in NAT64's well-known prefix (`64:ff9b::1.2.3.4`,
 * RFC 6052): behind a translator (SIIT-DC, RFC 7755) every IPv4 client of an IPv6-only gateway
 * comes from that one /64, and counted by it they would all share one slot.
 */
export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  const groups = ipv6Groups(address.split('%', 1)[0]!); // without the zone index (fe80::1%eth0)
  if (
    NAT64_WELL_KNOWN.every((group, i) => groups[i] === group) ||
    IPV4_MAPPED.every((group, i) => groups[i] === group)
  ) {
    const [high = 0, low = 0] = groups.slice(6);
    return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** The first six groups of NAT64's well-known prefix, 64:ff9b::/96 (RFC 6052). */
const NAT64_WELL_KNOWN = [0x64, 0xff9b, 0, 0, 0, 0];
/** The same of IPv4-mapped addresses, ::ffff:0:0/96, however written (`::ffff:102:304`). */
const IPV4_MAPPED = [0, 0, 0, 0, 0, 0xffff];

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail as its two). */
function ipv6Groups(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const partsOf = (text: string): number[] =>
    text === ''
      ? []
      : text.split(':').flatMap((part) => {
          if (!part.includes('.')) return [Number.parseInt(part, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = part.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const headParts = partsOf(head);
  if (tail === undefined) return headParts;
  const tailParts = partsOf(tail);
  return [
    ...headParts,
    ...Array<number>(8 - headParts.length - tailParts.length).fill(0),
    ...tailParts,
  ];
}

/**
 * The address group a connection counts under in every per-address limit (maxConnectionsPerIp,
 * the connection rate, the per-address budgets): its address's group (`remoteAddress` is the
 * client's once trusted proxies are looked through), 'unknown' for a socket without one.
 * Undefined for a pipe (stdio), which has no address: a process serving many children's pipes
 * must not have them all share one "unknown" slot.
 */
export function addressGroupOf(
  transport: TransportKind,
  remoteAddress: string | undefined,
): string | undefined {
  if (transport === 'stdio') return undefined;
  return remoteAddress === undefined ? 'unknown' : addressGroup(remoteAddress);
}

/** How addressGroup names an IPv6 group: its /64. */
const IPV6_GROUP_SUFFIX = '::/64';

/**
 * The IPv6 /48 of an address group as addressGroup names it (`2001:db8:0:ab00::/64` is in
 * `2001:db8:0::/48`): an end site's prefix, what one subscriber may be delegated whole.
 * Undefined for an IPv4 address and 'unknown'.
 */
export function ipv6SiteOf(group: string): string | undefined {
  if (!group.endsWith(IPV6_GROUP_SUFFIX)) return undefined;
  const [a, b, c] = group.slice(0, -IPV6_GROUP_SUFFIX.length).split(':');
  return `${a}:${b}:${c}::/48`;
}
