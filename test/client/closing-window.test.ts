/*
 * Between the server's close frame and the socket's close (the close handshake, a round trip at
 * least), the client's socket drops what it is sent: a notification or a call made then waits
 * for the next connection, as it does while disconnected, rather than vanish. A hand-driven
 * server holds the handshake open by not reading until the test lets it.
 */
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { RpcClient } from '../../src/client/client.js';
import { waitFor } from '../support/waiting.js';

let server: WebSocketServer | undefined;
let client: RpcClient | undefined;
afterEach(async () => {
  await client?.close();
  for (const socket of server?.clients ?? []) socket.terminate();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
});

it('a notify and a call made while the close handshake runs are sent on the next connection', async () => {
  server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => server!.once('listening', resolve));
  /** What each connection read, by connection. */
  const read: { method?: string; id?: number; params?: unknown }[][] = [];
  const sockets: WebSocket[] = [];
  server.on('connection', (socket) => {
    const mine: (typeof read)[number] = [];
    read.push(mine);
    sockets.push(socket);
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as (typeof mine)[number];
      mine.push(message);
      if (message.method === 'sum' && message.id !== undefined)
        socket.send(JSON.stringify({ jsonrpc: '2.0', result: 3, id: message.id }));
    });
  });
  const { port } = server.address() as AddressInfo;
  const made: WebSocket[] = [];
  class Tracked extends WebSocket {
    constructor(...args: ConstructorParameters<typeof WebSocket>) {
      super(...args);
      made.push(this);
    }
  }
  client = createClient({
    url: `ws://127.0.0.1:${port}/rpc`,
    WebSocket: Tracked,
    heartbeat: false,
    reconnect: { initialDelayMs: 10, maxDelayMs: 10 },
  });
  await client.opened();
  await waitFor(() => sockets.length === 1, 'the connection');
  // The server stops reading, then starts the close: its close frame reaches the client, whose
  // answer the server does not read, so the client's socket stays CLOSING.
  const raw = (sockets[0] as unknown as { _socket: Socket })._socket;
  raw.pause();
  sockets[0]!.close(4000, 'going');
  await waitFor(() => made[0]!.readyState === WebSocket.CLOSING, 'the close frame read');
  expect(client.state).toBe('open');
  client.notify('note', ['made while closing']);
  const answered = client.call('sum', [1, 2]);
  // The handshake ends; the client reconnects and sends what waited.
  raw.resume();
  expect(await answered).toBe(3);
  await waitFor(() => (read[1] ?? []).some((m) => m.method === 'note'), 'the notification');
  expect(read[0]!.map((m) => m.method)).not.toContain('note');
  expect(read[1]!.map((m) => m.method)).toEqual(['note', 'sum']);
});
