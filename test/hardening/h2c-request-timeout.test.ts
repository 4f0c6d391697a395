/**
 * A request with `Upgrade: h2c` (any upgrade the gateway does not take) is served as the
 * HTTP/1.1 request it also is, on a socket Node's HTTP server has handed over, and is bounded
 * in time as an ordinary request is (docs/security-and-limits.md): on the gateway's own server
 * a whole request, `httpHandler`'s included, within headersTimeoutMs + bodyTimeoutMs of its
 * headers, or 408 and the connection closed, whatever reads its body.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';

const res = new Resources();
const sockets: Socket[] = [];
const timers: ReturnType<typeof setInterval>[] = [];
afterEach(async () => {
  for (const timer of timers.splice(0)) clearInterval(timer);
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

const H2C =
  'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

interface Cut {
  /** When the server closed the socket (ms after the head was sent), or -1: still open. */
  closedAfterMs: number;
  /** The answer's status line ('' if none). */
  status: string;
}

/**
 * Opens a socket, sends the head and then a byte of the body every 50 ms, until the server closes
 * it or `waitMs` (far past the bound: a socket still open then is never cut) has passed.
 */
async function trickle(port: number, extra: string, waitMs: number): Promise<Cut> {
  const socket = connect({ port, host: '127.0.0.1' });
  sockets.push(socket);
  socket.on('error', () => undefined);
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const started = Date.now();
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => resolve(Date.now() - started)),
  );
  socket.write(`POST /upload HTTP/1.1\r\nHost: x\r\n${extra}Content-Length: 100000\r\n\r\nab`);
  timers.push(setInterval(() => socket.writable && socket.write('a'), 50));
  const closedAfterMs = await Promise.race([
    closed,
    new Promise<number>((resolve) => setTimeout(() => resolve(-1), waitMs)),
  ]);
  return { closedAfterMs, status: text.split('\r\n', 1)[0]! };
}

it('an h2c request to an httpHandler reading its body is bounded by headersTimeoutMs + bodyTimeoutMs', async () => {
  const { gateway, port } = await res.gateway({
    limits: { headersTimeoutMs: 200, bodyTimeoutMs: 300 },
    httpHandler: (req, answer) => {
      req.on('data', () => undefined);
      req.on('end', () => answer.writeHead(200).end('ok'));
      return true;
    },
  });
  expect(gateway.httpServer.requestTimeout).toBe(500);
  // Without the Upgrade header: Node's requestTimeout (checked every 200 ms here).
  const plain = await trickle(port, '', 15_000);
  expect(plain.closedAfterMs).toBeGreaterThanOrEqual(450);
  expect(plain.status).toBe('HTTP/1.1 408 Request Timeout');
  // With it: the same bound, the same answer.
  const h2c = await trickle(port, H2C, 15_000);
  expect(h2c.closedAfterMs, 'h2c socket still open after 15 s (-1)').toBeGreaterThanOrEqual(450);
  expect(h2c.status).toBe('HTTP/1.1 408 Request Timeout');
});
