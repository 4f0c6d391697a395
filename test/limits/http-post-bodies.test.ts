/**
 * POST /rpc bodies being read are bounded by the HTTP sockets that can be open (and node-wide by
 * limits.maxBufferedBytesTotal as well: http-post-body-total.test.ts) (limits.maxHttpSockets, maxHttpSocketsPerIp per address), each
 * reading one body at a time of at most maxMessageBytes (a declared Content-Length over it is
 * 413 before a byte of the body is read), for at most bodyTimeoutMs. So at most maxHttpSockets
 * × maxMessageBytes (2 000 × 1 MiB by default) is held, and 200 MiB from one address. Here the
 * figure is measured small: three sockets each holding most of a body, the fourth refused.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const SOCKETS = 3;
const MAX_MESSAGE_BYTES = 64 * 1024;
const DECLARED = 60_000;
const PART = 40_000;

it('POST /rpc bodies being read: at most maxHttpSockets of them, each within maxMessageBytes', async () => {
  const { gateway, httpUrl } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      maxHttpSockets: SOCKETS,
      maxHttpSocketsPerIp: SOCKETS,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      bytesPerSecondPerIp: 0,
    },
  });
  const port = Number(new URL(httpUrl).port);
  const serverSockets = new Map<number, Socket>();
  gateway.httpServer.on('connection', (socket: Socket) =>
    serverSockets.set(socket.remotePort!, socket),
  );
  const head =
    `POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${DECLARED}\r\n\r\n`;
  const open = async (): Promise<{ socket: Socket; closed: Promise<void> }> => {
    const socket = connect(port, '127.0.0.1');
    res.netSockets.push(socket);
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise((resolve) => socket.once('connect', resolve));
    return { socket, closed };
  };
  const clients: { socket: Socket; closed: Promise<void> }[] = [];
  for (let i = 0; i < SOCKETS; i++) {
    const client = await open();
    client.socket.write(head + 'x'.repeat(PART));
    clients.push(client);
  }
  // Each body's part read by the gateway (its socket's bytes, the headers with them).
  await waitUntil(
    () =>
      clients.every(
        ({ socket }) => serverSockets.get(socket.localPort!)?.bytesRead === socket.bytesWritten,
      ),
    'the bodies to be read',
  );
  // One more socket is refused before a byte is read: no fourth body.
  const extra = await open();
  extra.socket.write(head + 'x'.repeat(PART));
  await extra.closed;
  const held = clients.reduce(
    (sum, { socket }) => sum + serverSockets.get(socket.localPort!)!.bytesRead - head.length,
    0,
  );
  expect(held).toBe(SOCKETS * PART);
  expect(held).toBeLessThanOrEqual(SOCKETS * MAX_MESSAGE_BYTES);
  expect(clients.every(({ socket }) => !socket.destroyed)).toBe(true);
});
