/*
 * Between the server's close frame and the socket's close (the close handshake, a round trip at
 * least), the client's socket drops what it is sent: a notification or a call made then waits
 * for the next connection, as it does while disconnected, rather than vanish. A scripted server
 * holds the handshake open by not reading until the test lets it.
 */
import type { Socket } from 'node:net';
import { WebSocket } from 'ws';
import { afterEach, expect, it } from 'vitest';
import { FakeGateways } from '../support/fake-gateway.js';
import type { ClientFrame } from '../support/fake-gateway.js';
import { waitFor } from '../support/waiting.js';

const fakes = new FakeGateways();
afterEach(() => fakes.cleanup());

it('a notify and a call made while the close handshake runs are sent on the next connection', async () => {
  /** What each connection read, by connection. */
  const read: ClientFrame[][] = [];
  const { url, sockets } = await fakes.listen((socket) => {
    const mine: ClientFrame[] = [];
    read.push(mine);
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as ClientFrame;
      mine.push(message);
      if (message.method === 'sum' && message.id !== undefined)
        socket.send(JSON.stringify({ jsonrpc: '2.0', result: 3, id: message.id }));
    });
  });
  const made: WebSocket[] = [];
  class Tracked extends WebSocket {
    constructor(...args: ConstructorParameters<typeof WebSocket>) {
      super(...args);
      made.push(this);
    }
  }
  const client = fakes.client({
    url,
    WebSocket: Tracked,
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
