/**
 * With perMessageDeflate, one 64 KiB read can hold ~60 compressed frames that each inflate to
 * maxMessageBytes (a MiB of one repeated byte deflates to ~1 KiB), six times that as JSON text
 * for MessagePack (a byte of 0x01 in a string is six characters of JSON). While a connection's
 * messages wait for its input budget, `ws` inflates none of its further frames: the connection
 * holds the message that made it wait, not the read's sixty, and every message is still handled
 * in order. What it holds counts toward maxBufferedBytesTotal with what is queued for the peer.
 */
import { afterEach, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { msgpack } from '../../src/msgpack.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { clientFrame, handmadeDeflateClient } from './wire.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A MessagePack request to `sink` whose string param is `bytes` of 0x01 (six times as JSON). */
function sinkRequest(id: number, bytes: number): Buffer {
  const request = { jsonrpc: '2.0', id, method: 'sink', params: ['\u0001'.repeat(bytes)] };
  return clientFrame(msgpack.encode(request), 0x2, true);
}

/** A MessagePack connection with permessage-deflate, by hand: frames are written as they are. */
async function openMsgpackDeflate(gateway: Gateway, port: number) {
  const client = await handmadeDeflateClient(port, '/rpc', 'jsonrpc-2.0+msgpack');
  res.netSockets.push(client.socket);
  expect(client.head).toMatch(/^HTTP\/1\.1 101 /);
  const [session] = [...gateway.sessions.values()];
  return { socket: client.socket, session: session! };
}

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

it('a MessagePack connection writing 60 inflating frames in one read holds one message at most, and every one is answered in order', async () => {
  const maxMessageBytes = 64 * 1024;
  const { gateway, port } = await res.gateway({
    perMessageDeflate: true,
    encodings: ['json', 'msgpack'],
    heartbeatIntervalMs: 0,
    // Each message costs its JSON text (384 KiB): some wait, and the rest of the read behind them.
    limits: { maxMessageBytes, bytesPerSecond: 16 * 1024 * 1024, bytesPerSecondPerIp: 0 },
  });
  const handled: number[] = [];
  gateway.method('sink', (_params, ctx) => void handled.push(ctx.id as number));
  const { socket, session } = await openMsgpackDeflate(gateway, port);
  const held = watchHeld(session.transport as WsTransport);
  const text = 6 * (maxMessageBytes - 64);

  // Sixty frames in one write: a few KiB on the wire, 60 × 384 KiB of JSON text.
  socket.cork();
  for (let id = 1; id <= 60; id++) socket.write(sinkRequest(id, maxMessageBytes - 64));
  socket.uncork();
  await waitUntil(() => handled.length === 60, 'every message handled', 30_000);

  expect(handled).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  expect(held.most).toBeGreaterThan(text);
  expect(held.most).toBeLessThan(2 * text);
  expect(gateway.sessions.size).toBe(1);
});

it('what a connection holds of messages waiting for its input budget counts toward maxBufferedBytesTotal: past it, shed (1013)', async () => {
  const { gateway, port } = await res.gateway({
    perMessageDeflate: true,
    encodings: ['json', 'msgpack'],
    heartbeatIntervalMs: 0,
    limits: { maxBufferedBytesTotal: 4 * 1024 * 1024 },
  });
  gateway.method('sink', () => 1);
  const { socket, session } = await openMsgpackDeflate(gateway, port);
  // One message: a MiB of MessagePack, 6 MiB of JSON text, past the budget's burst (2 MiB) and
  // held until it has refilled; past the node's 4 MiB.
  socket.write(sinkRequest(1, 1024 * 1024 - 64));
  const closed = await session.closed;
  expect(closed.code).toBe(1013);
  await waitUntil(() => gateway.sessions.size === 0, 'the session gone');
});
