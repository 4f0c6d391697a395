/**
 * limits.connectionsPerSecondPerIp / connectionsBurstPerIp: each kept connection an address group
 * opens (a WebSocket upgrade, an event stream, a TCP connection) takes a token from the group's
 * bucket at admission; past it the upgrade is refused 429 with Retry-After, counted and logged
 * as a maxConnectionsPerIp refusal is. Closing connections does not refill it; another address
 * has its own; HTTP POST exchanges take nothing. Every address in 127/8 is loopback on Linux:
 * `localAddress` gives a test many source addresses.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { resolveLimits } from '../../src/server/options.js';
import type { GatewayLimits } from '../../src/server/options.js';
import { captureLogger, logged } from '../support/logging.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, closeOf, openSocket } from '../support/sockets.js';

const res = new Resources();
const closers: (() => void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await res.cleanup();
});

/** A token every 1 000 s: none comes back while a test runs. */
const SLOW: GatewayLimits = { connectionsPerSecondPerIp: 0.001, connectionsBurstPerIp: 3 };

interface Refusal {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A WebSocket upgrade from `localAddress` that must be refused: its status, headers and text. */
function refusedUpgrade(url: string, localAddress: string): Promise<Refusal> {
  const socket = res.track(new WebSocket(url, { localAddress }));
  return new Promise((resolve, reject) => {
    socket.on('error', () => undefined);
    socket.once('open', () => reject(new Error('upgrade unexpectedly succeeded')));
    socket.once('unexpected-response', (_req, response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.once('end', () => {
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body });
        socket.terminate();
      });
    });
  });
}

/** An HTTP request from `localAddress`: its status and headers; a 200 stream is left open. */
function httpFrom(
  port: number,
  localAddress: string,
  method: 'GET' | 'POST',
  path: string,
  body?: string,
): Promise<{ status: number; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        localAddress,
        method,
        path,
        agent: false,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (response) => {
        closers.push(() => response.destroy());
        if (response.statusCode !== 200 || method === 'POST') response.resume();
        resolve({ status: response.statusCode ?? 0, headers: response.headers });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A TCP connection from `localAddress` sends one request: the first line it is answered. */
function tcpFirstLine(port: number, localAddress: string): Promise<Record<string, unknown>> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  closers.push(() => socket.destroy());
  socket.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'no.such.method' })}\n`);
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end >= 0) resolve(JSON.parse(text.slice(0, end)) as Record<string, unknown>);
    });
  });
}

describe('limits.connectionsPerSecondPerIp', () => {
  it('defaults to 20/s with a burst of 100 (maxConnectionsPerIp); 0 is accepted as off', () => {
    const limits = resolveLimits();
    expect(limits.connectionsPerSecondPerIp).toBe(20);
    expect(limits.connectionsBurstPerIp).toBe(100);
    expect(limits.connectionsBurstPerIp).toBe(limits.maxConnectionsPerIp);
    expect(resolveLimits({ connectionsPerSecondPerIp: 0 }).connectionsPerSecondPerIp).toBe(0);
    expect(() => resolveLimits({ connectionsBurstPerIp: 0 })).toThrow(RangeError);
  });

  it('refuses the upgrade past the burst with 429 and Retry-After; another address is admitted; closing does not refill', async () => {
    const { logger, records } = captureLogger();
    const { url, httpUrl, gateway } = await res.gateway({ logger, limits: SLOW });
    const opened: WebSocket[] = [];
    for (let i = 0; i < 3; i++) {
      opened.push(await openSocket(res, url, undefined, { localAddress: '127.0.0.2' }));
    }

    const refused = await refusedUpgrade(url, '127.0.0.2');
    expect(refused.status).toBe(429);
    expect(refused.body).toBe('Too many new connections from this address\n');
    // The next token is ~1 000 s away: a whole number of seconds, at least 1.
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(1_000);

    expect(await attemptUpgrade(res, url, { localAddress: '127.0.0.3' })).toBe('open');

    // Closing every connection of the address gives back no token.
    for (const socket of opened) socket.close();
    await Promise.all(opened.map(closeOf));
    await expect.poll(() => gateway.sessions.size).toBe(1);
    expect((await refusedUpgrade(url, '127.0.0.2')).status).toBe(429);

    const text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_rejected_upgrades_total', { reason: 'ip-rate' })).toBe(2);
    const refusals = logged(records, 'upgrade rejected');
    expect(refusals[0]?.obj).toMatchObject({
      status: 429,
      reason: 'ip-rate',
      remoteAddress: '127.0.0.2',
    });
  });

  it('an event stream takes a token as an upgrade does; HTTP POST exchanges take none', async () => {
    const { port, url } = await res.gateway({
      routes: { events: '/rpc/events' },
      limits: SLOW,
    });
    const ping = JSON.stringify({ jsonrpc: '2.0', method: 'nothing.here' });
    for (let i = 0; i < 5; i++) {
      expect((await httpFrom(port, '127.0.0.4', 'POST', '/rpc', ping)).status).toBe(204);
    }
    expect((await httpFrom(port, '127.0.0.4', 'GET', '/rpc/events')).status).toBe(200);
    expect(await attemptUpgrade(res, url, { localAddress: '127.0.0.4' })).toBe('open');
    expect((await httpFrom(port, '127.0.0.4', 'GET', '/rpc/events')).status).toBe(200);

    const stream = await httpFrom(port, '127.0.0.4', 'GET', '/rpc/events');
    expect(stream.status).toBe(429);
    expect(Number(stream.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await refusedUpgrade(url, '127.0.0.4')).status).toBe(429);
    expect((await httpFrom(port, '127.0.0.4', 'POST', '/rpc', ping)).status).toBe(204);
  });

  it('a TCP connection takes a token; past the burst it gets a refusal line with status 429', async () => {
    const { gateway } = await res.gateway({ limits: SLOW });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    for (let i = 0; i < 3; i++) {
      expect(await tcpFirstLine(port, '127.0.0.6')).toMatchObject({
        id: 1,
        error: { code: -32601 },
      });
    }
    expect(await tcpFirstLine(port, '127.0.0.6')).toMatchObject({
      id: null,
      error: { message: 'Too many new connections from this address', data: { status: 429 } },
    });
    expect(await tcpFirstLine(port, '127.0.0.7')).toMatchObject({ id: 1 });
  });

  it('0 disables it: more upgrades than the burst from one address are all admitted', async () => {
    const { url } = await res.gateway({
      limits: { connectionsPerSecondPerIp: 0, connectionsBurstPerIp: 1 },
    });
    for (let i = 0; i < 4; i++) {
      const socket = await openSocket(res, url, undefined, { localAddress: '127.0.0.5' });
      socket.close();
      await closeOf(socket);
    }
  });
});
