/**
 * What the HTTP port answers without taking a request further holds no socket open: a refused
 * upgrade's socket is closed once the refusal is written, even when the client never sends its
 * FIN; a request refused before its body was read is answered with Connection: close and closed,
 * however slowly the body comes; a whole request gets headersTimeoutMs + bodyTimeoutMs. Requests
 * with an Upgrade to another protocol than WebSocket (h2c) are served as the HTTP requests they
 * are. An event-stream POST whose session ended while its body came is answered 404.
 */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { openStream } from '../sse/sse-raw.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

interface Raw {
  socket: Socket;
  /** Everything the server wrote. */
  received(): string;
  /** Resolves once the server ended its side (its FIN). */
  ended: Promise<void>;
  /** Resolves once the socket is closed. */
  closed: Promise<void>;
}

/**
 * A TCP connection that writes `text` once connected. `halfOpen`: it never ends its own side,
 * as a client holding sockets would not.
 */
async function raw(port: number, text: string, halfOpen = false): Promise<Raw> {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: halfOpen });
  sockets.push(socket);
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  const ended = new Promise<void>((resolve) => socket.once('end', resolve));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(text);
  return { socket, received: () => received, ended, closed };
}

/** How many sockets the server holds open. */
function connections(server: { getConnections(cb: (err: Error | null, n: number) => void): void }) {
  return new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );
}

const UPGRADE =
  'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';

describe('a refused upgrade', () => {
  it.each([
    ['to a path nobody serves (404)', '/nope', '', 404],
    ['from an origin not allowed (403)', '/rpc', 'Origin: https://evil.example\r\n', 403],
  ])(
    '%s: its socket is closed though the client never ends its side',
    async (_, path, extra, status) => {
      const { gateway, port } = await res.gateway({
        allowedOrigins: ['https://good.example'],
        limits: { maxHttpSocketsPerIp: 20, maxHttpSockets: 50 },
      });
      const held = await Promise.all(
        Array.from({ length: 5 }, () =>
          raw(port, `GET ${path} HTTP/1.1\r\nHost: x\r\n${UPGRADE}${extra}\r\n`, true),
        ),
      );
      await Promise.all(held.map((one) => one.ended));
      for (const one of held) expect(one.received()).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      // The clients' sides stay open: only the server closing its sockets brings this to 0.
      await waitUntil(async () => (await connections(gateway.httpServer)) === 0, 'sockets closed');
    },
  );
});

describe('a request refused before its body was read', () => {
  it.each([
    ['POST /rpc text/plain (415)', '/rpc', { 'content-type': 'text/plain' }, 415],
    ['POST /nothing (404)', '/nothing', { 'content-type': 'application/json' }, 404],
    [
      'POST /rpc/events to no session (404)',
      '/rpc/events',
      { 'content-type': 'application/json', 'x-wsrpc-session': 'x', 'x-wsrpc-secret': 'y' },
      404,
    ],
    ['POST /rpc/events naming no session (400)', '/rpc/events', {}, 400],
    ['PUT /rpc (405)', '/rpc', { 'content-type': 'application/json' }, 405],
  ])(
    '%s: Connection: close, and closed while the body trickles',
    async (_, path, headers, status) => {
      const { port } = await res.gateway({ routes: { events: '/rpc/events' } });
      const method = path === '/rpc' && status === 405 ? 'PUT' : 'POST';
      const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
      const client = await raw(
        port,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n${lines.join('')}\r\n{"a":`,
      );
      await client.ended;
      expect(client.received()).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(client.received().toLowerCase()).toContain('connection: close');
      await client.closed;
    },
  );

  it('a request nothing reads gets headersTimeoutMs + bodyTimeoutMs in all (408)', async () => {
    // An httpHandler that answers without reading the body: Node would read the rest to keep the
    // connection alive, for as long as it takes.
    const { gateway, port } = await res.gateway({
      limits: { headersTimeoutMs: 200, bodyTimeoutMs: 300 },
      httpHandler: (_req, answer) => {
        answer.writeHead(200).end('ok');
        return true;
      },
    });
    expect(gateway.httpServer.requestTimeout).toBe(500);
    const client = await raw(
      port,
      'POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab',
    );
    const trickle = setInterval(() => client.socket.write('a'), 50);
    try {
      await client.closed;
    } finally {
      clearInterval(trickle);
    }
    expect(client.received()).toMatch(/^HTTP\/1.1 200 /);
    expect(client.received()).toContain('HTTP/1.1 408 ');
  });

  it('a server the application brings keeps its requestTimeout unless it set a socket bound', async () => {
    const server = createServer();
    const { gateway } = await res.gateway({ server });
    expect(gateway.httpServer.requestTimeout).toBe(300_000);
  });
});

describe('an Upgrade to another protocol than WebSocket (h2c)', () => {
  const H2C =
    'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

  it('is ignored: the routes answer as for any HTTP/1.1 request', async () => {
    const { gateway, port } = await res.gateway();
    gateway.method('echo', (params) => params);
    const livez = await raw(port, `GET /livez HTTP/1.1\r\nHost: x\r\n${H2C}\r\n`);
    await livez.closed;
    expect(livez.received()).toMatch(/^HTTP\/1.1 200 /);
    expect(livez.received()).toContain('{"status":"ok"}');

    const body = '{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}';
    const rpc = await raw(
      port,
      `POST /rpc HTTP/1.1\r\nHost: x\r\n${H2C}Content-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    rpc.socket.write(body.slice(10));
    await rpc.closed;
    expect(rpc.received()).toMatch(/^HTTP\/1.1 200 /);
    expect(rpc.received()).toContain('{"jsonrpc":"2.0","result":[1],"id":1}');

    const other = await raw(port, `GET /nothing HTTP/1.1\r\nHost: x\r\n${H2C}\r\n`);
    await other.closed;
    expect(other.received()).toMatch(/^HTTP\/1.1 404 /);
    expect(await connections(gateway.httpServer)).toBe(0);
  });

  it('with a chunked body: 411', async () => {
    const { port } = await res.gateway();
    const chunked = await raw(
      port,
      `POST /rpc HTTP/1.1\r\nHost: x\r\n${H2C}Content-Type: application/json\r\n` +
        'Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    );
    await chunked.closed;
    expect(chunked.received()).toMatch(/^HTTP\/1.1 411 /);
  });
});

describe('an event-stream POST whose session ended while its body came', () => {
  it('is answered 404, as for an unknown session', async () => {
    const { httpUrl, port } = await res.gateway({ routes: { events: '/rpc/events' } });
    const stream = await openStream(`${httpUrl}/rpc/events`);
    const { session, secret } = stream.session;
    const body = '{"jsonrpc":"2.0","method":"rpc.ping","id":1}';
    const post = await raw(
      port,
      `POST /rpc/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `X-Wsrpc-Session: ${session}\r\nX-Wsrpc-Secret: ${secret}\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    const ended = await fetch(`${httpUrl}/rpc/events`, {
      method: 'DELETE',
      headers: { 'x-wsrpc-session': session, 'x-wsrpc-secret': secret },
    });
    expect(ended.status).toBe(204);
    post.socket.write(body.slice(10));
    await waitUntil(() => post.received().includes('\r\n\r\n'), 'an answer');
    expect(post.received()).toMatch(/^HTTP\/1.1 404 /);
    stream.destroy();
  });
});
