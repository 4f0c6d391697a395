/**
 * trustedProxies: behind a reverse proxy every client arrives from the proxy's address, so
 * per-IP limits would count them all as one. X-Forwarded-For from a trusted proxy names the
 * client; from anyone else it is ignored (it could say anything).
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayOptions, UpgradeRequest } from '../../src/index.js';
import { TrustedProxies } from '../../src/server/client-address.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const xff = (value: string) => ({ headers: { 'x-forwarded-for': value } });

/** A gateway that records the remoteAddress its authenticate hook saw, and a `sum` method. */
async function gatewayWith(options: GatewayOptions<unknown>) {
  const seen: (string | undefined)[] = [];
  const running = await res.gateway<unknown>({
    ...options,
    authenticate: (request: UpgradeRequest) => {
      seen.push(request.remoteAddress);
      return {};
    },
  });
  running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  return { ...running, seen };
}

function post(httpUrl: string, forwardedFor: string, id: number): Promise<unknown> {
  return fetch(`${httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [id, 1], id }),
  }).then((r) => r.json());
}

describe('trustedProxies (X-Forwarded-For)', () => {
  it('from a trusted proxy, clients count by their forwarded address: different ones pass, the same one hits the per-IP limit', async () => {
    const { gateway, url, seen } = await gatewayWith({
      trustedProxies: ['127.0.0.1'],
      limits: { maxConnectionsPerIp: 1 },
    });
    expect(await attemptUpgrade(res, url, xff('203.0.113.1'))).toBe('open');
    expect(await attemptUpgrade(res, url, xff('203.0.113.2'))).toBe('open');
    expect(await attemptUpgrade(res, url, xff('203.0.113.1'))).toBe(429);
    expect(seen).toEqual(['203.0.113.1', '203.0.113.2']);
    expect([...gateway.sessions.values()].map((s) => s.remoteAddress).sort()).toEqual([
      '203.0.113.1',
      '203.0.113.2',
    ]);
  });

  it('without trustedProxies a spoofed X-Forwarded-For is ignored: the socket address counts', async () => {
    const { url, seen } = await gatewayWith({ limits: { maxConnectionsPerIp: 1 } });
    expect(await attemptUpgrade(res, url, xff('203.0.113.1'))).toBe('open');
    expect(await attemptUpgrade(res, url, xff('203.0.113.2'))).toBe(429);
    expect(seen).toEqual(['127.0.0.1']);
  });

  it('the client is the right-most entry that is not a trusted proxy; entries left of it are not believed', async () => {
    const { url, seen } = await gatewayWith({
      trustedProxies: ['127.0.0.0/8', '10.0.0.0/8'],
      limits: { maxConnectionsPerIp: 1 },
    });
    // The client wrote "198.51.100.7" itself; the outer proxy (10.1.2.3) appended the client's
    // real address, and the inner one appended the outer one's.
    expect(await attemptUpgrade(res, url, xff('198.51.100.7, 203.0.113.9, 10.1.2.3'))).toBe('open');
    // The same client, lying differently on the left, is still the same client.
    expect(await attemptUpgrade(res, url, xff('192.0.2.1, 203.0.113.9, 10.1.2.3'))).toBe(429);
    expect(seen).toEqual(['203.0.113.9']);
  });

  it('HTTP POST: rate buckets are per forwarded client behind a trusted proxy', async () => {
    const { httpUrl } = await gatewayWith({
      trustedProxies: ['127.0.0.1'],
      limits: { ratePerSecond: 0.001, rateBurst: 1 },
    });
    expect(await post(httpUrl, '203.0.113.1', 1)).toMatchObject({ result: 2 });
    expect(await post(httpUrl, '203.0.113.1', 2)).toMatchObject({ error: { code: -32003 } });
    expect(await post(httpUrl, '203.0.113.2', 3)).toMatchObject({ result: 4 });
  });

  it('HTTP POST without trustedProxies: one bucket for the socket address, whatever the header says', async () => {
    const { httpUrl } = await gatewayWith({ limits: { ratePerSecond: 0.001, rateBurst: 1 } });
    expect(await post(httpUrl, '203.0.113.1', 1)).toMatchObject({ result: 2 });
    expect(await post(httpUrl, '203.0.113.2', 2)).toMatchObject({ error: { code: -32003 } });
  });
});

describe('TrustedProxies', () => {
  /** A request as TrustedProxies reads it: the socket's peer and the header. */
  function request(peer: string, forwardedFor?: string | string[]): IncomingMessage {
    return {
      socket: { remoteAddress: peer } as Socket,
      headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
    } as unknown as IncomingMessage;
  }

  it('addresses and subnets, IPv4 and IPv6, and IPv4 peers seen as ::ffff:a.b.c.d', () => {
    const proxies = new TrustedProxies(['10.0.0.0/8', '::1', 'fd00::/8', '192.0.2.10']);
    for (const trusted of ['10.255.0.1', '::1', 'fd12::5', '192.0.2.10', '::ffff:10.0.0.1'])
      expect(proxies.trusts(trusted), trusted).toBe(true);
    for (const other of ['11.0.0.1', '::2', 'fe80::1', '192.0.2.11', undefined])
      expect(proxies.trusts(other), String(other)).toBe(false);
  });

  it('picks the client from the header only when the peer is trusted', () => {
    const proxies = new TrustedProxies(['10.0.0.0/8', 'fd00::/8']);
    expect(proxies.clientAddress(request('10.0.0.1', '203.0.113.5'))).toBe('203.0.113.5');
    expect(proxies.clientAddress(request('198.51.100.1', '203.0.113.5'))).toBe('198.51.100.1');
    expect(proxies.clientAddress(request('10.0.0.1'))).toBe('10.0.0.1');
    // Repeated headers, IPv6 in brackets with a port, IPv4 with a port.
    expect(proxies.clientAddress(request('fd00::1', ['1.1.1.1', '[2001:db8::7]:443']))).toBe(
      '2001:db8::7',
    );
    expect(proxies.clientAddress(request('10.0.0.1', '203.0.113.5:5555'))).toBe('203.0.113.5');
    // Every hop trusted: the furthest one. Garbage: the nearest trusted hop before it.
    expect(proxies.clientAddress(request('10.0.0.1', '10.0.0.9, 10.0.0.8'))).toBe('10.0.0.9');
    expect(proxies.clientAddress(request('10.0.0.1', 'nonsense, 10.0.0.8'))).toBe('10.0.0.8');
    expect(proxies.clientAddress(request('10.0.0.1', 'nonsense'))).toBe('10.0.0.1');
  });

  it.each([
    'localhost',
    '10.0.0.0/33',
    'fd00::/129',
    '10.0.0.0/x',
    '',
    '10.0.0.0/',
    '10.0.0.0/1e1',
    '10.0.0.0/-0',
  ])('refuses %j at construction', (entry) => {
    expect(() => new TrustedProxies([entry])).toThrow(TypeError);
  });
});
