/**
 * Issue 14, finding 2: the HTTP port's sockets are bounded before any byte is read, per address
 * and in total (limits.maxHttpSocketsPerIp, maxHttpSockets), and timed (headersTimeoutMs for the
 * headers, bodyTimeoutMs for a POST body), on the gateway's own server (http or https) and on
 * one the application brings. Every address in 127/8 is loopback on Linux: `localAddress` gives
 * a test many source addresses.
 */
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';
import { getStatusFrom, rawTcpSocket } from '../support/raw-tcp.js';
import type { RawTcpSocket } from '../support/raw-tcp.js';
import { waitUntil, within } from '../support/waiting.js';
import { attemptUpgrade, openRaw } from '../support/sockets.js';
import { sampleValue, scrape } from '../support/metrics.js';

const res = new Resources();
const sockets: Socket[] = [];
type RawSocket = RawTcpSocket;
const rawSocket = (port: number, from: string, text = ''): Promise<RawSocket> =>
  rawTcpSocket(sockets, port, from, text);
const get = getStatusFrom;
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

/** The first lines of a WebSocket upgrade, without the blank line that ends the headers. */
const HALF_UPGRADE =
  'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n';

/** The sockets `gateway`'s socket gate counts (a private field), read when called. */
function countedBy(gateway: unknown): () => number {
  return () => (gateway as { socketGate: { open: number } }).socketGate.open;
}

/**
 * A half-sent upgrade from `localAddress`, resolved once the gateway counts it: the gate sees
 * the sockets in the order they were opened (which of an address's is the oldest).
 */
async function countedSocket(
  port: number,
  localAddress: string,
  counted: () => number,
): Promise<RawSocket> {
  const before = counted();
  const socket = await rawSocket(port, localAddress, HALF_UPGRADE);
  await waitUntil(() => counted() === before + 1, `the socket from ${localAddress} to be counted`);
  return socket;
}

/** rpc_http_sockets_closed_total{reason}; -1 while /metrics cannot be reached (a full port). */
async function closedSockets(httpUrl: string, reason: string): Promise<number> {
  const text = await scrape(httpUrl).catch(() => undefined);
  if (text === undefined) return -1;
  return sampleValue(text, 'rpc_http_sockets_closed_total', { reason }) ?? 0;
}

describe('sockets per address before the upgrade (maxHttpSocketsPerIp)', () => {
  it('N half-sent upgrades from one address are held, the N+1th is refused at once; other addresses, /livez and a freed slot still work', async () => {
    const N = 20;
    const { port, url, httpUrl } = await res.gateway({
      // Long enough that only the bound, never the timeout, closes a socket in this test.
      limits: { maxHttpSocketsPerIp: N, headersTimeoutMs: 600_000 },
    });
    const held: RawSocket[] = [];
    for (let i = 0; i < N; i++) held.push(await rawSocket(port, '127.0.0.2', HALF_UPGRADE));

    // The kernel accepts the N+1th; the gateway destroys it before reading a byte.
    const refused = await rawSocket(port, '127.0.0.2', HALF_UPGRADE);
    await within(refused.closed, 'the N+1th socket from one address to be closed');
    expect(refused.received()).toBe('');
    expect(held.filter((s) => s.isClosed())).toEqual([]);

    // Another address connects, and /livez answers, while 127.0.0.2 holds its maximum.
    expect(await attemptUpgrade(res, url, { localAddress: '127.0.0.3' })).toBe('open');
    expect(await get(port, '/livez')).toBe(200);
    expect(await closedSockets(httpUrl, 'ip-limit')).toBe(1);

    // A socket that closes frees its slot: a request from 127.0.0.2 gets through again.
    held.pop()!.socket.destroy();
    await waitUntil(async () => (await get(port, '/livez', '127.0.0.2')) === 200, 'a freed slot');
    expect(held.filter((s) => s.isClosed())).toEqual([]);
  });

  it("a trusted proxy's sockets count only in the total: its clients are told apart by the headers", async () => {
    const { gateway, port } = await res.gateway({
      trustedProxies: ['127.0.0.4'],
      limits: { maxHttpSocketsPerIp: 2, maxHttpSockets: 6, headersTimeoutMs: 600_000 },
    });
    const counted = countedBy(gateway);
    // A trusted proxy carries many clients: its sockets are not bounded per address.
    const viaProxy: RawSocket[] = [];
    for (let i = 0; i < 4; i++) viaProxy.push(await countedSocket(port, '127.0.0.4', counted));
    expect(await get(port, '/livez', '127.0.0.4')).toBe(200);
    await waitUntil(() => counted() === 4, "the probe's socket to leave the count");
    // But they count in the total: 4 held + 2 more fill it. The next takes the place of the
    // oldest half-sent socket of the address holding the most, never of the proxy's.
    const fromFive = [
      await countedSocket(port, '127.0.0.5', counted),
      await countedSocket(port, '127.0.0.5', counted),
    ];
    const next = await rawSocket(port, '127.0.0.6', HALF_UPGRADE);
    await within(fromFive[0]!.closed, "127.0.0.5's oldest socket to be cut for the next");
    // 127.0.0.5 holds as many as any address holds half-sent now: its next is refused.
    const over = await rawSocket(port, '127.0.0.5', HALF_UPGRADE);
    await within(over.closed, 'a socket over maxHttpSockets to be closed');
    expect(viaProxy.filter((s) => s.isClosed())).toEqual([]);
    expect([fromFive[1]!.isClosed(), next.isClosed()]).toEqual([false, false]);
  });
});

describe('sockets in total before the upgrade (maxHttpSockets)', () => {
  it('a half-sent socket beyond the total takes the place of the oldest half-sent one of an address holding more, else is refused; WebSocket sessions do not count', async () => {
    const { gateway, port, url, httpUrl } = await res.gateway({
      limits: { maxHttpSockets: 3, headersTimeoutMs: 600_000 },
    });
    const counted = countedBy(gateway);
    // Sessions leave the count once upgraded: five of them leave room for three sockets.
    for (let i = 0; i < 5; i++) await openRaw(res, url);
    const held: RawSocket[] = [];
    for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) {
      held.push(await countedSocket(port, address, counted));
    }
    // 127.0.0.5 holds none, fewer than 127.0.0.2 (the first to hold one): it takes that place.
    const newcomer = await rawSocket(port, '127.0.0.5', HALF_UPGRADE);
    await within(held[0]!.closed, "127.0.0.2's socket to be cut for 127.0.0.5's");
    // 127.0.0.3 holds as many as any address: its next socket is refused.
    const refused = await rawSocket(port, '127.0.0.3', HALF_UPGRADE);
    await within(refused.closed, 'a socket over maxHttpSockets to be closed');
    expect([...held.slice(1), newcomer].filter((s) => s.isClosed())).toEqual([]);
    // Both counted: the socket cut and the one refused.
    newcomer.socket.destroy();
    await waitUntil(async () => (await closedSockets(httpUrl, 'capacity')) >= 2, 'the count');
  });
});

describe('headers read timeout (headersTimeoutMs)', () => {
  it('cuts a half-sent upgrade, a half-sent request and a half-sent second request on a keep-alive connection; open sessions stay', async () => {
    const { port, url, httpUrl, gateway } = await res.gateway({
      limits: { headersTimeoutMs: 300 },
    });
    gateway.method('echo', (params) => params);
    const session = await openRaw(res, url);

    const upgrade = await rawSocket(port, '127.0.0.2', HALF_UPGRADE);
    const request = await rawSocket(port, '127.0.0.3', 'GET /livez HTTP/1.1\r\nHost: x\r\n');
    const silent = await rawSocket(port, '127.0.0.4');
    // A whole request, answered; then the first half of the next one on the same connection.
    const keepAlive = await rawSocket(port, '127.0.0.5', 'GET /livez HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitUntil(() => keepAlive.received().includes('"ok"'), 'the first answer');
    keepAlive.socket.write('GET /livez HTTP/1.1\r\nHost: x\r\n');

    for (const [what, socket] of Object.entries({ upgrade, request, silent, keepAlive })) {
      await within(socket.closed, `the half-sent ${what} to be cut`, 15_000);
    }
    // Counted when the gate cuts one; Node's own headersTimeout (set to the same value) may
    // answer a half-sent request with 408 first.
    expect(await closedSockets(httpUrl, 'headers-timeout')).toBeGreaterThan(0);
    // The WebSocket session opened before is not affected.
    expect(session.socket.readyState).toBe(WebSocket.OPEN);
    expect(await session.request('echo', ['still here'])).toMatchObject({ result: ['still here'] });
  });

  it("applies to an application's own server too: the bounds and the first request's timeout, and Node's headersTimeout lowered to it", async () => {
    const server = createServer();
    res.netServers.push(server); // the application's to close
    server.headersTimeout = 120_000;
    const { port } = await res.gateway({
      server,
      limits: { headersTimeoutMs: 300, maxHttpSocketsPerIp: 2 },
    });
    expect(server.headersTimeout).toBe(300);
    const first = await rawSocket(port, '127.0.0.2', HALF_UPGRADE);
    await rawSocket(port, '127.0.0.2', HALF_UPGRADE);
    const third = await rawSocket(port, '127.0.0.2', HALF_UPGRADE);
    await within(third.closed, 'the socket over the bound to be refused');
    await within(first.closed, 'the half-sent upgrade to be cut', 15_000);
    expect(await get(port, '/livez')).toBe(200);
  });
});

describe('https: the TLS handshake is inside the headers timeout; sessions over TLS leave the count', () => {
  let certificate: TestCertificate;
  beforeAll(() => {
    certificate = makeSelfSignedCertificate();
  });
  afterAll(() => certificate.remove());

  it('a silent TCP connection is cut; wss sessions do not fill maxHttpSockets', async () => {
    const { port } = await res.gateway({
      tls: { cert: certificate.cert, key: certificate.key },
      limits: { headersTimeoutMs: 300, maxHttpSockets: 2 },
    });
    const wss = `wss://127.0.0.1:${port}/rpc`;
    for (let i = 0; i < 4; i++) {
      const socket = res.track(new WebSocket(wss, { ca: certificate.cert }));
      await new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve());
        socket.once('error', reject);
      });
    }
    // A TLS handshake that never starts.
    const silent = await rawSocket(port, '127.0.0.2');
    await within(silent.closed, 'the silent connection to be cut', 15_000);
    // A handshake done, then half-sent headers.
    const halfSent = deferred();
    const tls = tlsConnect({ host: '127.0.0.1', port, ca: certificate.cert }, () => {
      tls.write(HALF_UPGRADE);
    });
    tls.on('error', () => undefined);
    tls.once('close', () => halfSent.resolve());
    await within(halfSent.promise, 'the half-sent upgrade over TLS to be cut', 15_000);
  });

  it('listenTcp over TLS: a handshake that never comes is cut after headersTimeoutMs too', async () => {
    const { gateway } = await res.gateway({
      tls: { cert: certificate.cert, key: certificate.key },
      limits: { headersTimeoutMs: 300 },
    });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const silent = await rawSocket(port, '127.0.0.2');
    await within(silent.closed, 'the silent TLS connection to be cut', 15_000);
  });
});

describe('body read timeout (bodyTimeoutMs)', () => {
  it('a POST body that stops half-way is answered 408 and closed, and frees its admission slot', async () => {
    const { port, httpUrl, gateway } = await res.gateway({
      limits: { bodyTimeoutMs: 300, maxConnections: 1 },
    });
    gateway.method('echo', (params) => params);
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [1], id: 1 });
    const slow = await rawSocket(
      port,
      '127.0.0.2',
      `POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await within(slow.closed, 'the slow POST to be closed', 15_000);
    expect(slow.received().split('\r\n', 1)[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(await closedSockets(httpUrl, 'body-timeout')).toBe(1);

    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ jsonrpc: '2.0', result: [1], id: 1 });
  });
});
