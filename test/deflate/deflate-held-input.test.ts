/**
 * With perMessageDeflate, one 64 KiB read can hold ~60 compressed frames that each inflate to
 * maxMessageBytes (a MiB of one repeated byte deflates to ~1 KiB), and `ws` hands over every
 * message of what it has read, paused or not: what waits for the connection's input budget is
 * up to 60 MiB of JSON text, six times that for MessagePack (a byte of 0x01 in a string is six
 * characters of JSON). Those messages count toward maxBufferedBytesTotal with what is queued
 * for the peer, so connections holding more than the node can keep are shed (1013), largest
 * first, rather than the process running out of memory.
 */
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { constants, deflateRawSync } from 'node:zlib';
import { afterEach, expect, it } from 'vitest';
import { msgpack } from '../../src/msgpack.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A masked, final, compressed (RSV1) client frame of `opcode` carrying `payload` deflated. */
function compressedFrame(payload: Uint8Array, opcode: number): Buffer {
  const deflated = deflateRawSync(payload, { finishFlush: constants.Z_SYNC_FLUSH, level: 9 });
  const data = deflated.subarray(0, deflated.length - 4); // RFC 7692 7.2.1: the tail goes
  if (data.length >= 65_536) throw new Error('a frame this test does not write');
  const mask = randomBytes(4);
  const head =
    data.length < 126
      ? Buffer.from([0xc0 | opcode, 0x80 | data.length])
      : Buffer.from([0xc0 | opcode, 0x80 | 126, data.length >> 8, data.length & 0xff]);
  const masked = Buffer.from(data);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= mask[i & 3]!;
  return Buffer.concat([head, mask, masked]);
}

it('a MessagePack connection holding 60 inflated frames is shed (1013), not kept', async () => {
  const running = await res.gateway({
    perMessageDeflate: true,
    encodings: ['json', 'msgpack'],
    heartbeatIntervalMs: 0,
    limits: { maxBufferedBytesTotal: 64 * 1024 * 1024 },
  });
  const { gateway, port } = running;
  gateway.method('sink', () => 1);
  const request = msgpack.encode({
    jsonrpc: '2.0',
    method: 'sink',
    params: ['\u0001'.repeat(1024 * 1024 - 64)],
  });
  const frame = compressedFrame(request, 0x2);
  const socket = connect(port, '127.0.0.1');
  res.netSockets.push(socket);
  socket.on('error', () => undefined);
  let received = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(
    'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
      'Sec-WebSocket-Protocol: jsonrpc-2.0+msgpack\r\n' +
      'Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover; ' +
      'server_no_context_takeover\r\n\r\n',
  );
  await waitUntil(() => received.includes('\r\n\r\n'), 'the upgrade answered');
  expect(received.toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
  const [session] = [...gateway.sessions.values()];
  // Sixty frames in one write: 65 KiB on the wire, 60 MiB of MessagePack, 360 MiB of JSON text.
  socket.cork();
  for (let i = 0; i < 60; i++) socket.write(frame);
  socket.uncork();
  const closed = await session!.closed;
  expect(closed.code).toBe(1013);
  await waitUntil(() => gateway.sessions.size === 0, 'the session gone');
});
