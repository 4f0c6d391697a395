/**
 * limits.maxConnectionsPerIpv6Site: the connections of every /64 of one IPv6 /48 count together,
 * so a subscriber delegated a /56 or a /48 cannot hold every slot of maxConnections by spreading
 * over its /64s, each within maxConnectionsPerIp. Clients are told apart by a trusted proxy's
 * X-Forwarded-For (the test is the loopback proxy).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { resolveGatewayOptions } from '../../src/index.js';
import { resolveLimits } from '../../src/server/options.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, upgradeRefusal } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';
import { postRpc } from './http-post.js';

const res = new Resources();
afterEach(() => res.cleanup());

const from = (address: string) => ({ headers: { 'x-forwarded-for': address } });

describe('limits.maxConnectionsPerIpv6Site', () => {
  it('bounds the connections of all /64s of one /48 together: 429 ip-limit past it, other /48s and IPv4 unaffected, a closed one freeing its place', async () => {
    const { gateway, url, httpUrl } = await res.gateway({
      trustedProxies: ['127.0.0.1'],
      limits: { maxConnectionsPerIp: 2, maxConnectionsPerIpv6Site: 3, metricsCacheMs: 0 },
    });
    gateway.method('echo', (params) => params);
    // Three /64s of 2001:db8:0::/48, one connection each (a /56 subscriber's 256 /64s).
    for (const net of ['ab01', 'ab02', 'ab03']) {
      expect(await attemptUpgrade(res, url, from(`2001:db8:0:${net}::1`))).toBe('open');
    }
    const refused = await upgradeRefusal(res, url, undefined, {
      'x-forwarded-for': '2001:db8:0:ab04::1',
    });
    expect({ status: refused.status, retryAfter: refused.headers['retry-after'] }).toEqual({
      status: 429,
      retryAfter: '5',
    });
    const post = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '2001:db8:0:ffff::9' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }),
    });
    await post.text();
    expect(post.status).toBe(429);
    expect(
      sampleValue(await scrape(httpUrl), 'rpc_rejected_upgrades_total', { reason: 'ip-limit' }),
    ).toBe(2);

    expect(await attemptUpgrade(res, url, from('2001:db8:1:ab01::1'))).toBe('open');
    expect(await attemptUpgrade(res, url, from('198.51.100.7'))).toBe('open');
    expect((await postRpc(`${httpUrl}/rpc`, { id: 2, method: 'echo', params: [2] })).status).toBe(
      200,
    );

    // One of the /48's connections closes: its place is free again.
    const sessions = [...gateway.sessions.values()];
    const first = sessions.find((s) => s.remoteAddress === '2001:db8:0:ab01::1')!;
    first.close();
    await waitUntil(() => gateway.sessions.size === sessions.length - 1, 'the session to close');
    await waitUntil(
      async () => (await attemptUpgrade(res, url, from('2001:db8:0:ab04::1'))) === 'open',
      'a place in the /48',
    );
  });

  it('unless set, is 10 × maxConnectionsPerIp: 10 /64s of a /48 at maxConnectionsPerIp 1 fill it', async () => {
    const { url } = await res.gateway({
      trustedProxies: ['127.0.0.1'],
      limits: { maxConnectionsPerIp: 1 },
    });
    for (let net = 1; net <= 10; net++) {
      expect(await attemptUpgrade(res, url, from(`2001:db8:0:${net}::1`))).toBe('open');
    }
    expect(await attemptUpgrade(res, url, from('2001:db8:0:11::1'))).toBe(429);
    expect(await attemptUpgrade(res, url, from('2001:db8:1:1::1'))).toBe('open');
  });

  it('is an integer at least 1, 1 000 with the defaults, following a raised maxConnectionsPerIp unless set', () => {
    expect(resolveLimits().maxConnectionsPerIpv6Site).toBe(1_000);
    expect(resolveLimits({ maxConnectionsPerIp: 2_000 }).maxConnectionsPerIpv6Site).toBe(20_000);
    expect(
      resolveLimits({ maxConnectionsPerIp: 2_000, maxConnectionsPerIpv6Site: 1_500 })
        .maxConnectionsPerIpv6Site,
    ).toBe(1_500);
    expect(resolveLimits({ maxConnectionsPerIp: 3 }).maxConnectionsPerIpv6Site).toBe(30);
    const config = resolveGatewayOptions({ limits: { maxConnectionsPerIp: 2_000 } });
    expect(config.limits.maxConnectionsPerIpv6Site).toBe(20_000);
    expect(() => resolveLimits({ maxConnectionsPerIpv6Site: 0 })).toThrow(RangeError);
    expect(() => resolveLimits({ maxConnectionsPerIpv6Site: 2.5 })).toThrow(RangeError);
  });
});
