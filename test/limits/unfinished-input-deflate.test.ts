/**
 * limits.maxBufferedBytesTotal counts a compressed WebSocket message still arriving by what it
 * holds inflated: on a connection that negotiated permessage-deflate, ws inflates each fragment
 * as it comes and keeps the inflated fragments until the message's last one. A few KiB of
 * compressed fragments can stand for maxMessageBytes of text, so many connections each sending
 * most of such a message could together hold far more than the budget while having sent almost
 * nothing. Past it the connections holding the most are closed with 1013, largest first.
 */
import type { Socket } from 'node:net';
import { constants, createDeflateRaw } from 'node:zlib';
import type { DeflateRaw } from 'node:zlib';
import { WebSocket } from 'ws';
import { afterEach, expect, it } from 'vitest';
import type { Session } from '../../src/index.js';
import { FRAGMENT_OVERHEAD_BYTES, receiverHeldBytes } from '../../src/transport/ws-transport.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const KiB = 1024;
const BUDGET = 2 * 1024 * KiB;
/** Each connection's message, as text; its first PART characters go in the first fragment. */
const LENGTH = 1000 * KiB;
const PART = 768 * KiB;
const CONNECTIONS = 4;
/** What each holds once its first fragment is inflated: the text, and the fragment's Buffer. */
const HELD = PART + FRAGMENT_OVERHEAD_BYTES;

const head = '{"jsonrpc":"2.0","id":1,"method":"length","params":["';
const tail = '"]}';
const request = head + 'x'.repeat(LENGTH - head.length - tail.length) + tail;

/** A client frame (masked with a zero key: the payload goes as it is). */
function frame(first: boolean, fin: boolean, payload: Buffer): Buffer {
  const header = Buffer.alloc(14);
  // The first fragment: text, RSV1 (compressed); a continuation carries neither.
  header[0] = (fin ? 0x80 : 0) | (first ? 0x40 | 0x01 : 0x00);
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(BigInt(payload.length), 2);
  return Buffer.concat([header, payload]);
}

/** `text` through `deflate`, flushed: one fragment's compressed payload, in the message's stream. */
function compressed(deflate: DeflateRaw, text: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  const collect = (chunk: Buffer): number => parts.push(chunk);
  deflate.on('data', collect);
  deflate.write(text);
  return new Promise((resolve) =>
    deflate.flush(constants.Z_SYNC_FLUSH, () => {
      deflate.off('data', collect);
      resolve(Buffer.concat(parts));
    }),
  );
}

function receiverOf(session: Session): unknown {
  return (session.transport as unknown as { socket: { _receiver: unknown } }).socket._receiver;
}

it('a compressed message still arriving counts inflated toward maxBufferedBytesTotal: past it the largest close 1013', async () => {
  const { url, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    perMessageDeflate: true,
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecond: 0, bytesPerSecondPerIp: 0 },
  });
  gateway.method('length', (params) => (params as [string])[0].length);
  const clients: WebSocket[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const client = res.track(new WebSocket(url, { perMessageDeflate: true }));
    client.on('error', () => undefined);
    await new Promise((resolve) => client.once('open', resolve));
    expect(client.extensions).toContain('permessage-deflate');
    clients.push(client);
  }
  await waitUntil(() => gateway.sessions.size === CONNECTIONS, 'the sessions');
  const sessions = [...gateway.sessions.values()];
  const deflates = clients.map(() => createDeflateRaw());
  let sent = 0;
  for (const [i, client] of clients.entries()) {
    const payload = await compressed(deflates[i]!, request.slice(0, PART));
    sent += payload.length;
    (client as unknown as { _socket: Socket })._socket.write(frame(true, false, payload));
  }
  // Compressed, what was sent is a small part of what it stands for.
  expect(sent).toBeLessThan(PART / 100);
  await waitUntil(
    () => sessions.every((s) => s.isClosed || receiverHeldBytes(receiverOf(s)) === HELD),
    'the first fragments inflated',
  );
  await new Promise((resolve) => setImmediate(resolve));

  const closed = sessions.filter((s) => s.isClosed);
  expect(closed.length).toBeGreaterThan(0);
  for (const session of closed) {
    expect(await within(session.closed, 'the close')).toMatchObject({ code: 1013 });
  }
  const open = sessions.filter((s) => !s.isClosed);
  const held = open.reduce((sum, s) => sum + (receiverHeldBytes(receiverOf(s)) ?? 0), 0);
  expect(held).toBe(open.length * HELD);
  expect(held).toBeLessThanOrEqual(BUDGET);

  // A connection left is served: its message's last fragment comes, and it is answered.
  const index = sessions.indexOf(open[0]!);
  const client = clients[index]!;
  const answer = new Promise<string>((resolve) =>
    client.once('message', (data: Buffer) => resolve(data.toString())),
  );
  const rest = await compressed(deflates[index]!, request.slice(PART));
  (client as unknown as { _socket: Socket })._socket.write(frame(false, true, rest));
  expect(JSON.parse(await within(answer, 'the answer'))).toMatchObject({
    id: 1,
    result: LENGTH - 56,
  });
  for (const deflate of deflates) deflate.close();
});
