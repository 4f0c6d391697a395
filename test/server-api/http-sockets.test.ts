/**
 * The server API's HTTP sockets, over raw TCP: a request refused before its body is read (401,
 * 405, 415) is answered with Connection: close and its socket closed by the server however long
 * the body goes on, on the API's own listener and on a path of the gateway's port; the own
 * listener bounds its sockets per address and in total (listen.maxHttpSocketsPerIp,
 * maxHttpSockets) and times a connection's first headers (listen.headersTimeoutMs). Every address
 * in 127/8 is loopback on Linux: `localAddress` gives a test many source addresses.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { resolveServerApiConfig, startServerApi } from '../../src/server-api/index.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { noTracing } from '../../src/tracing/index.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { API_KEY, call, startApi } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

interface Raw {
  socket: Socket;
  /** Everything the server wrote. */
  received(): string;
  isClosed(): boolean;
  /** Resolves once the server ended its side (its FIN). */
  ended: Promise<void>;
  /** Resolves once the socket is closed. */
  closed: Promise<void>;
}

/**
 * A TCP connection from `localAddress` that writes `text` once connected. `halfOpen`: it never
 * ends its own side (as a client holding sockets would not), so it closes only when the server
 * destroys it; otherwise it ends its side once the server ends its own.
 */
async function raw(
  port: number,
  text: string,
  localAddress = '127.0.0.1',
  halfOpen = false,
): Promise<Raw> {
  const socket = connect({ port, host: '127.0.0.1', localAddress, allowHalfOpen: halfOpen });
  sockets.push(socket);
  let received = '';
  let isClosed = false;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  const ended = new Promise<void>((resolve) => socket.once('end', resolve));
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('close', () => reject(new Error(`${localAddress} closed before connecting`)));
  });
  if (text) socket.write(text);
  return { socket, received: () => received, isClosed: () => isClosed, ended, closed };
}

/**
 * Send a request whose chunked body never ends: a chunk every few ms until the socket closes.
 * Resolves with what the server answered once it has closed the socket (a write to a socket the
 * server destroyed is reset, which closes this side too).
 */
async function refusedWhileBodyComes(port: number, head: string): Promise<string> {
  const client = await raw(
    port,
    `${head}Transfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n`,
    '127.0.0.1',
    true,
  );
  const chunk = `400\r\n${'a'.repeat(0x400)}\r\n`;
  const trickle = setInterval(() => {
    if (!client.socket.destroyed) client.socket.write(chunk);
  }, 5);
  try {
    await within(client.ended, 'the server to end its side while the body still comes');
    await within(client.closed, 'the server to close the socket while the body still comes');
  } finally {
    clearInterval(trickle);
  }
  return client.received();
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** The server API on a path of a gateway's own port: the port and the path. */
async function apiOnPath(): Promise<{ port: number; path: string }> {
  const running = await res.gateway({});
  const config = resolveServerApiConfig({ path: '/api', keys: [API_KEY] });
  apis.push(
    await startServerApi(running.gateway, config, {
      logger: silentLogger,
      tracing: noTracing,
      server: running.gateway.httpServer,
    }),
  );
  return { port: running.port, path: '/api' };
}

const JSON_TYPE = 'Content-Type: application/json\r\n';
const refusals: [string, string, string, number][] = [
  ['no Authorization (401)', 'POST', JSON_TYPE, 401],
  ['a wrong key (401)', 'POST', `${JSON_TYPE}Authorization: Bearer ${'x'.repeat(32)}\r\n`, 401],
  ['PUT (405)', 'PUT', `${JSON_TYPE}Authorization: Bearer ${API_KEY}\r\n`, 405],
  [
    'text/plain (415)',
    'POST',
    `Content-Type: text/plain\r\nAuthorization: Bearer ${API_KEY}\r\n`,
    415,
  ],
];

describe('a server API request refused before its body is read', () => {
  it.each(refusals)(
    'own listener, %s: Connection: close, and the socket closed while the body comes',
    async (_, method, headers, status) => {
      const api = await startApi((await res.gateway({})).gateway);
      apis.push(api);
      const answer = await refusedWhileBodyComes(
        portOf(api.url),
        `${method} / HTTP/1.1\r\nHost: x\r\n${headers}`,
      );
      expect(answer).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(answer.toLowerCase()).toContain('connection: close');
    },
  );

  it.each(refusals)(
    "on the gateway's port, %s: Connection: close, and the socket closed while the body comes",
    async (_, method, headers, status) => {
      const { port, path } = await apiOnPath();
      const answer = await refusedWhileBodyComes(
        port,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\n${headers}`,
      );
      expect(answer).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(answer.toLowerCase()).toContain('connection: close');
    },
  );

  it('any request but an authenticated JSON POST is refused with the connection closed', async () => {
    const api = await startApi((await res.gateway({})).gateway);
    apis.push(api);
    const port = portOf(api.url);
    const request = fc.record({
      method: fc.constantFrom('POST', 'PUT', 'GET', 'DELETE', 'PATCH'),
      type: fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        '',
      ),
      auth: fc.constantFrom(`Bearer ${API_KEY}`, `Bearer ${API_KEY}x`, 'Basic abc', ''),
    });
    await fc.assert(
      fc.asyncProperty(request, async ({ method, type, auth }) => {
        const accepted = method === 'POST' && type.startsWith('application/json');
        fc.pre(!(accepted && auth === `Bearer ${API_KEY}`));
        const headers =
          (type ? `Content-Type: ${type}\r\n` : '') + (auth ? `Authorization: ${auth}\r\n` : '');
        const answer = await refusedWhileBodyComes(
          port,
          `${method} / HTTP/1.1\r\nHost: x\r\n${headers}`,
        );
        const status = method !== 'POST' ? 405 : !accepted ? 415 : 401;
        expect(answer).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
        expect(answer.toLowerCase()).toContain('connection: close');
      }),
      { numRuns: 25 },
    );
  });

  it('an authenticated request on the same listener is still answered', async () => {
    const running = await res.gateway({});
    running.gateway.topic('news');
    const api = await startApi(running.gateway);
    apis.push(api);
    expect(await call(api.url, 'publish', { topic: 'news', data: 1 })).toEqual({
      seq: 1,
      duplicate: false,
    });
  });
});

/** The first lines of a POST, without the blank line that ends the headers. */
const HALF_REQUEST = 'POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n';

describe("the server API's own listener bounds its sockets", () => {
  it('N half-sent requests from one address are held, the N+1th is closed at once; another address is served', async () => {
    const N = 8;
    const running = await res.gateway({});
    running.gateway.topic('news');
    const api = await startApi(running.gateway, {
      // Long enough that only the bound, never the timeout, closes a socket in this test.
      listen: { host: '127.0.0.1', port: 0, maxHttpSocketsPerIp: N, headersTimeoutMs: 600_000 },
    });
    apis.push(api);
    const port = portOf(api.url);
    const held: Raw[] = [];
    for (let i = 0; i < N; i++) held.push(await raw(port, HALF_REQUEST, '127.0.0.2'));

    // The kernel accepts the N+1th; the server API destroys it before reading a byte.
    const refused = await raw(port, HALF_REQUEST, '127.0.0.2');
    await within(refused.closed, 'the N+1th socket from one address to be closed');
    expect(refused.received()).toBe('');
    expect(held.filter((s) => s.isClosed())).toEqual([]);

    // Another address is served while 127.0.0.2 holds its maximum.
    expect(await call(api.url, 'publish', { topic: 'news', data: 1 })).toMatchObject({ seq: 1 });
    expect(held.filter((s) => s.isClosed())).toEqual([]);
  });

  it('past maxHttpSockets a socket from an address holding fewer takes the place of a half-sent one; one from an address holding as many is closed at once', async () => {
    const N = 6;
    const api = await startApi((await res.gateway({})).gateway, {
      listen: { host: '127.0.0.1', port: 0, maxHttpSockets: N, headersTimeoutMs: 600_000 },
    });
    apis.push(api);
    const port = portOf(api.url);
    const held: Raw[] = [];
    for (let i = 0; i < N; i++) held.push(await raw(port, HALF_REQUEST, `127.0.1.${i + 1}`));
    // 127.0.2.1 holds none, fewer than each of the others holds half-sent: one of theirs is cut.
    const newcomer = await raw(port, HALF_REQUEST, '127.0.2.1');
    await within(Promise.race(held.map((s) => s.closed)), 'a half-sent socket to be cut');
    // 127.0.2.1 holds one now, as many as any address: its next is closed at once.
    const refused = await raw(port, HALF_REQUEST, '127.0.2.1');
    await within(refused.closed, 'the socket beyond maxHttpSockets to be closed');
    expect(refused.received()).toBe('');
    expect(held.filter((s) => s.isClosed())).toHaveLength(1);
    expect(newcomer.isClosed()).toBe(false);
  });

  it('a connection that does not finish its headers within headersTimeoutMs is closed', async () => {
    const api = await startApi((await res.gateway({})).gateway, {
      listen: { host: '127.0.0.1', port: 0, headersTimeoutMs: 200 },
    });
    apis.push(api);
    const slow = await raw(portOf(api.url), HALF_REQUEST);
    await within(slow.closed, 'the half-sent request to be closed');
    // Destroyed by the socket bound, or answered 408 by Node's headersTimeout: whichever is first.
    expect(slow.received()).toMatch(/^(|HTTP\/1\.1 408 [^]*)$/);
  });
});
