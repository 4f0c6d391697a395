/**
 * Once the gateway closes a WebSocket (here for a binary frame on a JSON connection, 1003), the
 * socket is read on until the peer's close frame, within the close grace, and its input budget
 * no longer pauses it (that frame must be read). Nothing the peer sends in that time is handled:
 * its answers could not be sent, and parsing it would be work past the connection's budget.
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MESSAGES = 40;

it('a connection the gateway is closing has nothing more it sends handled', async () => {
  let handled = 0;
  const { url, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { bytesPerSecond: 64 * 1024, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  gateway.method('count', () => ++handled);
  const socket = res.track(new WebSocket(url));
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('open', resolve));
  // Handled while open.
  const first = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'count' }));
  expect(JSON.parse(await within(first, 'the first answer'))).toMatchObject({ result: 1 });
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  const session = [...gateway.sessions.values()][0]!;

  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  socket.send(Buffer.from('{}'), { binary: true });
  for (let id = 1; id <= MESSAGES; id++) {
    socket.send(
      JSON.stringify({ jsonrpc: '2.0', id, method: 'count', params: ['x'.repeat(1024)] }),
    );
  }
  // The client answers the gateway's close frame after what it sent: by the session's close the
  // gateway has read all of it.
  expect(await within(closed, 'the close')).toBe(1003);
  await within(session.closed, 'the session closed');
  expect(handled).toBe(1);
});
