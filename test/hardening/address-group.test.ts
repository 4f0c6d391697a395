import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/server/admission.js';
import { addressGroup } from '../../src/server/address-group.js';
import type { UpgradeRequest } from '../../src/server/options.js';

describe('addressGroup (what per-address limits count under)', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002::ffff', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::ffff:0:1.2.3.4', '0:0:0:0::/64'],
    // IPv4-mapped however written (a forwarded header may spell it so).
    ['::ffff:102:304', '1.2.3.4'],
    ['0:0:0:0:0:ffff:1.2.3.4', '1.2.3.4'],
    ['::FFFF:CB00:7107', '203.0.113.7'],
    // NAT64's well-known prefix: the IPv4 client behind the translator, however it is written.
    ['64:ff9b::203.0.113.7', '203.0.113.7'],
    ['64:ff9b::cb00:7107', '203.0.113.7'],
    ['64:FF9B:0:0:0:0:CB00:7107', '203.0.113.7'],
    ['0064:ff9b:0000::0:203.0.113.7', '203.0.113.7'],
    // Not the well-known /96: a network-specific or local-use prefix counts by its /64.
    ['64:ff9b:1::203.0.113.7', '64:ff9b:1:0::/64'],
    ['64:ff9b::1:203.0.113.7', '64:ff9b:0:0::/64'],
  ])('%s counts as %s', (address, group) => {
    expect(addressGroup(address)).toBe(group);
  });

  it('the per-address limit holds across the addresses of one IPv6 /64', () => {
    const admission = new Admission({ maxConnections: 100, maxConnectionsPerIp: 2 }, undefined);
    const upgrade = (remoteAddress: string): UpgradeRequest => ({
      transport: 'websocket',
      request: undefined,
      headers: {},
      url: new URL('ws://gateway/rpc'),
      query: new URLSearchParams(),
      cookies: {},
      protocols: [],
      remoteAddress,
      token: undefined,
      phase: 'upgrade',
    });
    expect(typeof admission.admit(upgrade('2001:db8:1:2::1'))).toBe('function');
    expect(typeof admission.admit(upgrade('2001:db8:1:2::2'))).toBe('function');
    expect(admission.admit(upgrade('2001:db8:1:2:ffff::3'))).toMatchObject({ status: 429 });
    // Another /64 has its own count; releasing one address frees a slot of its group.
    expect(typeof admission.admit(upgrade('2001:db8:1:3::1'))).toBe('function');
    admission.release('websocket', '2001:db8:1:2::2');
    expect(typeof admission.admit(upgrade('2001:db8:1:2::9'))).toBe('function');
    // IPv4 clients behind a NAT64 translator each count alone, not as one /64.
    for (const client of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
      expect(typeof admission.admit(upgrade(`64:ff9b::${client}`))).toBe('function');
      expect(typeof admission.admit(upgrade(`64:ff9b::${client}`))).toBe('function');
    }
    expect(admission.admit(upgrade('64:ff9b::c633:6401'))).toMatchObject({ status: 429 });
  });
});
