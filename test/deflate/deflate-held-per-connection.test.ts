/**
 * What one WebSocket connection can make the gateway hold of what it sent: with perMessageDeflate
 * a read of a few KiB can carry dozens of frames that each inflate to maxMessageBytes. While the
 * connection's messages wait (its input budget, a peer not reading its replies), `ws` inflates
 * none of its further frames: it holds at most the message that made it wait, and every message
 * is still handled, in order.
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';
import { clientFrame, handmadeDeflateClient } from './wire.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 128 * 1024;
/** 64 messages of almost maxMessageBytes: 8 MiB inflated, a few KiB on the wire. */
const MESSAGES = 64;

/** The most `transport` held of incoming text, sampled after each message ws hands it. */
function watchHeld(transport: WsTransport): { most: number } {
  const seen = { most: 0 };
  const onMessage = transport.onSocketMessage.bind(transport);
  transport.onSocketMessage = (data, isBinary) => {
    onMessage(data, isBinary);
    seen.most = Math.max(seen.most, transport.heldInputChars);
  };
  return seen;
}

it('a ws client with perMessageDeflate writing frames that inflate to maxMessageBytes: the gateway holds at most one, and answers all in order', async () => {
  const { gateway, url } = await res.gateway({
    perMessageDeflate: true,
    heartbeatIntervalMs: 0,
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      // The burst is 2 × maxMessageBytes: the third message waits, the rest with it.
      bytesPerSecond: 4 * 1024 * 1024,
      bytesPerSecondPerIp: 0,
    },
  });
  const handled: number[] = [];
  gateway.method('sink', (params) => {
    handled.push((params as [number, string])[0]);
    return (params as [number, string])[0];
  });
  const before = sessionIds(gateway);
  const client = res.track(new WebSocket(url, { perMessageDeflate: true }));
  const replies: { id: number; result: number }[] = [];
  client.on('message', (data: Buffer) => replies.push(JSON.parse(data.toString('utf8'))));
  await within(
    new Promise<void>((resolve, reject) => {
      client.once('open', () => resolve());
      client.once('error', reject);
    }),
    'the WebSocket to open',
  );
  expect(client.extensions).toContain('permessage-deflate');
  const held = watchHeld(newSession(gateway, before).transport as WsTransport);

  const pad = 'a'.repeat(MAX_MESSAGE_BYTES - 100);
  for (let i = 1; i <= MESSAGES; i++) {
    client.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'sink', params: [i, pad] }));
  }
  await waitUntil(() => replies.length === MESSAGES, 'every reply', 30_000);

  const order = Array.from({ length: MESSAGES }, (_, i) => i + 1);
  expect(handled).toEqual(order);
  expect(replies.map((reply) => reply.id)).toEqual(order);
  // Held: the one message that took the budget past its end, never the frames behind it.
  expect(held.most).toBeGreaterThan(0);
  expect(held.most).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
});

/**
 * A connection whose input budget refills a byte a second, sent four large requests in one write
 * (and `after`, if given): one waits for the budget, for days, and the frames after it wait
 * compressed in ws's receiver. Only the socket's close or the gateway's lets ws parse on.
 */
async function stuckForDays(after: Buffer[] = []) {
  const { gateway, port } = await res.gateway({
    perMessageDeflate: true,
    heartbeatIntervalMs: 0,
    limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
  });
  gateway.method('sink', () => 1);
  const before = sessionIds(gateway);
  const client = await handmadeDeflateClient(port);
  res.netSockets.push(client.socket);
  expect(client.head).toMatch(/^HTTP\/1\.1 101 /);
  const session = newSession(gateway, before);
  const transport = session.transport as WsTransport;
  const pad = 'a'.repeat(MAX_MESSAGE_BYTES - 100);
  const frames = Array.from({ length: 4 }, (_, i) =>
    clientFrame(
      Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'sink', params: [pad] })),
      0x1,
      true,
    ),
  );
  client.socket.write(Buffer.concat([...frames, ...after]));
  await waitUntil(() => transport.frameWaiting, 'a frame to wait to be inflated');
  expect(transport.inputPaused).toBe(true);
  return { gateway, session, transport, client };
}

it('a connection cut while its frames wait to be inflated closes: its session goes', async () => {
  const { gateway, session, client } = await stuckForDays();
  client.socket.destroy();
  await within(session.closed, 'the session to close');
  await waitUntil(() => gateway.sessions.size === 0, 'the session gone');
});

it("the gateway closing a connection whose frames wait to be inflated reads on to the peer's close frame", async () => {
  const close = Buffer.alloc(2);
  close.writeUInt16BE(1000);
  const { session, transport } = await stuckForDays([clientFrame(close, 0x8, false)]);
  const socket = transport.socket as unknown as {
    _receiver: { once(event: 'conclude', listener: (code: number) => void): void };
    _socket: { destroyed: boolean };
  };
  // Read while the socket is up: the close handshake completes, nothing terminated after a grace.
  const concluded = new Promise<{ code: number; destroyed: boolean }>((resolve) =>
    socket._receiver.once('conclude', (code) =>
      resolve({ code, destroyed: socket._socket.destroyed }),
    ),
  );
  session.close(4000, 'enough');
  expect(await within(concluded, "the peer's close frame read")).toEqual({
    code: 1000,
    destroyed: false,
  });
  expect((await within(session.closed, 'the session to close')).code).toBe(4000);
});
