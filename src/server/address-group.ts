import { isIP } from 'node:net';
import type { TransportKind } from '../transport/transport.js';

/**
 * What per-address limits count under. IPv4: the address. IPv6: its /64 prefix, since one
 * subscriber (a home, a VM) is given at least a whole /64 and can pick a new address in it for
 * each connection; counting single IPv6 addresses would let it step around the limit. Many are
 * given more (a /56 or a /48: ipv6SiteOf). IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) count as
 * their IPv4 address.
 */
export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  const bare = address.split('%', 1)[0]!; // zone index (fe80::1%eth0)
  const [head = '', tail] = bare.split('::');
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === undefined || tail === '' ? [] : tail.split(':');
  // An embedded IPv4 tail (::1.2.3.4) takes two groups; only the first four groups matter here.
  const groups =
    tail === undefined
      ? headParts
      : [
          ...headParts,
          ...Array<string>(8 - headParts.length - tailParts.length).fill('0'),
          ...tailParts,
        ];
  const prefix = groups
    .slice(0, 4)
    .map((group) => (Number.parseInt(group, 16) || 0).toString(16))
    .join(':');
  return `${prefix}::/64`;
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
