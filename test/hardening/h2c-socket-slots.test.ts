/**
 * A request with `Upgrade: h2c` is served on a socket Node's HTTP server has handed over, which
 * still counts in maxHttpSocketsPerIp / maxHttpSockets until it closes
 * (docs/security-and-limits.md). Its socket is closed once its client has ended its side (a
 * socket allows half-open, so that is a FIN, not a close), so clients that leave free their
 * places, and `gateway.close()` completes with such sockets still open.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const sockets: Socket[] = [];
const gateways: RunningGateway[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(gateways.splice(0).map(({ gateway }) => gateway.close({ timeoutMs: 1_000 })));
});

const H2C =
  'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';
const HEAD = `POST /upload HTTP/1.1\r\nHost: x\r\n${H2C}Content-Length: 1000\r\n\r\nab`;

/** The gateway, with an httpHandler that reads bodies, and how many requests it has been handed. */
async function gatewayWith(
  limits: Record<string, number>,
): Promise<RunningGateway & { upgrades: () => number }> {
  let handed = 0;
  const running = await startGateway({
    limits,
    httpHandler: (req: IncomingMessage, answer: ServerResponse) => {
      handed++;
      req.on('data', () => undefined);
      req.on('end', () => answer.writeHead(200).end('ok'));
      return true;
    },
  });
  gateways.push(running);
  return Object.assign(running, { upgrades: () => handed });
}

async function open(port: number): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1' });
  sockets.push(socket);
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  return socket;
}

/** A GET /livez on a fresh socket: its status line, or 'reset' when the socket was cut. */
async function livez(port: number): Promise<string> {
  const socket = await open(port);
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.write('GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  await new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return text === '' ? 'reset' : text.split('\r\n', 1)[0]!;
}

/** Resolves with 'closed', or a note of how long close() has been waiting. */
function closing(running: RunningGateway, waitMs: number): Promise<string> {
  gateways.splice(gateways.indexOf(running), 1);
  return Promise.race([
    running.gateway.close({ timeoutMs: 1_000 }).then(() => 'closed'),
    new Promise<string>((resolve) =>
      setTimeout(() => resolve(`still closing after ${waitMs} ms`), waitMs),
    ),
  ]);
}

it('sockets of h2c requests whose clients left are freed (maxHttpSocketsPerIp)', async () => {
  // Long timeouts: only the clients' FIN can free the places within the test.
  const { port, upgrades } = await gatewayWith({
    headersTimeoutMs: 10_000,
    bodyTimeoutMs: 30_000,
    maxHttpSocketsPerIp: 3,
  });
  for (let i = 0; i < 3; i++) (await open(port)).write(HEAD);
  await waitUntil(() => upgrades() === 3, 'the three requests read');
  expect(await livez(port), 'the three h2c sockets hold every place').toBe('reset');
  // The clients leave: their places come free (each try before that is cut, as above).
  for (const socket of sockets.splice(0)) socket.end();
  await waitUntil(async () => (await livez(port)) === 'HTTP/1.1 200 OK', 'a place free');
});

it('gateway.close() completes after an h2c request whose client left', async () => {
  const running = await gatewayWith({ headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000 });
  const socket = await open(running.port);
  const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(HEAD);
  await waitUntil(() => running.upgrades() === 1, 'the request read');
  socket.end();
  await gone; // the server's side closed once the client's FIN came
  expect(await closing(running, 15_000)).toBe('closed');
});

it('gateway.close() completes with an h2c request still sending its body', async () => {
  const running = await gatewayWith({ headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000 });
  const socket = await open(running.port);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(HEAD);
  await waitUntil(() => running.upgrades() === 1, 'the request read');
  expect(await closing(running, 15_000)).toBe('closed');
  await closed;
});
