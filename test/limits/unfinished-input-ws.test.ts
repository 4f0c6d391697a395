/**
 * limits.maxBufferedBytesTotal counts a WebSocket message still arriving: ws holds a frame's
 * bytes until its last one has come (up to maxMessageBytes a connection, its maxPayload), and
 * many connections each sending one slowly could together hold far more than the budget. Past
 * it the connections holding the most are closed with 1013, largest first, as for queued
 * output. What ws holds is read from its Receiver's fields (receiverHeldBytes); a receiver of
 * another shape is not counted, and the connection is served all the same.
 */
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import * as wsModule from 'ws';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Session } from '../../src/index.js';
import {
  FRAGMENT_OVERHEAD_BYTES,
  TransportSocket,
  receiverHeldBytes,
} from '../../src/transport/ws-transport.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** ws's Receiver: exported by ws, not declared by its types. */
const Receiver = (wsModule as unknown as { Receiver: new (options: object) => Writable }).Receiver;

const KiB = 1024;
const BUDGET = 2 * 1024 * KiB;
/** Each connection's frame: announced at 1 000 KiB, this much of it sent. */
const ANNOUNCED = 1000 * KiB;
const PART = 768 * KiB;
const CONNECTIONS = 4;

/** A client frame's header (FIN, text, masked with a zero key: the payload goes as it is). */
function frameHeader(length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x81;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(BigInt(length), 2);
  return header; // the last four bytes: the mask key, zero
}

/** The request `length` bytes long, as text: its first `PART` bytes go first. */
function requestOf(length: number): string {
  const head = '{"jsonrpc":"2.0","id":1,"method":"length","params":["';
  const tail = '"]}';
  return head + 'x'.repeat(length - head.length - tail.length) + tail;
}

function receiverOf(session: Session): unknown {
  return (session.transport as unknown as { socket: { _receiver: unknown } }).socket._receiver;
}

/** What ws has read of the frame under way (its unparsed bytes), from its own field. */
function bufferedOf(session: Session): number {
  return Number((receiverOf(session) as { _bufferedBytes: number })._bufferedBytes);
}

const request = requestOf(ANNOUNCED);

/**
 * CONNECTIONS clients, each having sent PART of a frame announced at ANNOUNCED; resolves once
 * every byte arrived (or its connection was closed) and the budget's check has had its turn.
 */
async function partFramesSent(): Promise<{ clients: WebSocket[]; sessions: Session[] }> {
  const { url, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecond: 0, bytesPerSecondPerIp: 0 },
  });
  gateway.method('length', (params) => (params as [string])[0].length);
  const clients: WebSocket[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const client = res.track(new WebSocket(url));
    client.on('error', () => undefined);
    await new Promise((resolve) => client.once('open', resolve));
    clients.push(client);
  }
  await waitUntil(() => gateway.sessions.size === CONNECTIONS, 'the sessions');
  const sessions = [...gateway.sessions.values()];
  for (const client of clients) {
    const raw = (client as unknown as { _socket: Socket })._socket;
    raw.write(frameHeader(ANNOUNCED));
    raw.write(request.slice(0, PART));
  }
  await waitUntil(
    () => sessions.every((s) => s.isClosed || bufferedOf(s) >= PART),
    'the frames to arrive',
  );
  await new Promise((resolve) => setImmediate(resolve));
  return { clients, sessions };
}

/** The rest of `client`'s frame, and the answer to the request it carries. */
async function finishFrame(client: WebSocket): Promise<unknown> {
  const answer = new Promise<string>((resolve) =>
    client.once('message', (data: Buffer) => resolve(data.toString())),
  );
  (client as unknown as { _socket: Socket })._socket.write(request.slice(PART));
  return JSON.parse(await within(answer, 'the answer'));
}

describe('the WebSocket message still arriving', () => {
  it('counts toward maxBufferedBytesTotal: past it the largest are closed 1013', async () => {
    const { clients, sessions } = await partFramesSent();

    const closed = sessions.filter((s) => s.isClosed);
    expect(closed.length).toBeGreaterThan(0);
    for (const session of closed) {
      expect(await within(session.closed, 'the close')).toMatchObject({ code: 1013 });
    }
    const open = sessions.filter((s) => !s.isClosed);
    const held = open.reduce((sum, s) => sum + (receiverHeldBytes(receiverOf(s)) ?? 0), 0);
    expect(held).toBe(open.length * PART);
    expect(held).toBeLessThanOrEqual(BUDGET);
    // A connection left is served: its frame ends, and is answered.
    const kept = open[0]!;
    expect(await finishFrame(clients[sessions.indexOf(kept)]!)).toMatchObject({
      id: 1,
      result: ANNOUNCED - 56,
    });
  });

  it('from a receiver of another shape is not counted, and the connection is served', async () => {
    // Another version of ws, as far as receiverHeldBytes can tell: a field it reads is no number.
    const proto = TransportSocket.prototype as unknown as { setSocket(...args: unknown[]): void };
    const setSocket = Object.getOwnPropertyDescriptor(proto, 'setSocket');
    proto.setSocket = function (this: { _receiver: Record<string, unknown> }, ...args: unknown[]) {
      Object.getPrototypeOf(proto).setSocket.apply(this, args);
      const receiver = this._receiver;
      let value = Number(receiver._bufferedBytes);
      Object.defineProperty(receiver, '_bufferedBytes', {
        get: () => new Number(value),
        set: (next: unknown) => (value = Number(next)),
      });
    };
    try {
      const { clients, sessions } = await partFramesSent();
      expect(receiverHeldBytes(receiverOf(sessions[0]!))).toBeUndefined();
      // Over the budget, uncounted: nothing closed (each stays within maxMessageBytes).
      expect(sessions.filter((s) => s.isClosed)).toEqual([]);
      expect(await finishFrame(clients[0]!)).toMatchObject({ id: 1, result: ANNOUNCED - 56 });
    } finally {
      if (setSocket) Object.defineProperty(proto, 'setSocket', setSocket);
      else delete (proto as { setSocket?: unknown }).setSocket;
    }
  });

  it('is read from ws’s Receiver: the frame under way, the fragments before it; not from another shape', () => {
    const receiver = new Receiver({ isServer: true, maxPayload: 4 * ANNOUNCED });
    receiver.on('error', () => undefined);
    expect(receiverHeldBytes(receiver)).toBe(0);
    // A first fragment (text, not FIN) of 1 000 bytes, whole; then 300 of a 2 000-byte one.
    const first = Buffer.concat([
      Buffer.from([0x01, 0x80 | 126, 0x03, 0xe8, 0, 0, 0, 0]),
      Buffer.alloc(1000, 0x61),
    ]);
    receiver.write(first);
    // Each fragment held is a Buffer: its bytes and what a Buffer holds beside them.
    expect(receiverHeldBytes(receiver)).toBe(1000 + FRAGMENT_OVERHEAD_BYTES);
    receiver.write(Buffer.from([0x80, 0x80 | 126, 0x07, 0xd0, 0, 0, 0, 0]));
    expect(receiverHeldBytes(receiver)).toBe(1000 + FRAGMENT_OVERHEAD_BYTES);
    receiver.write(Buffer.alloc(300, 0x61));
    expect(receiverHeldBytes(receiver)).toBe(1300 + FRAGMENT_OVERHEAD_BYTES);
    let message: Buffer | undefined;
    receiver.on('message', (data: Buffer) => (message = data));
    receiver.write(Buffer.alloc(1700, 0x61));
    expect(message?.length).toBe(3000);
    expect(receiverHeldBytes(receiver)).toBe(0);
    // A thousand one-byte fragments of a message still arriving.
    const oneByte = Buffer.from([0x00, 0x80 | 1, 0, 0, 0, 0, 0x61]);
    receiver.write(Buffer.from([0x01, 0x80 | 1, 0, 0, 0, 0, 0x61]));
    for (let i = 1; i < 1000; i++) receiver.write(oneByte);
    expect(receiverHeldBytes(receiver)).toBe(1000 * (1 + FRAGMENT_OVERHEAD_BYTES));
    // Another version's receiver, shaped otherwise: not counted (the connection is still served).
    expect(receiverHeldBytes({ buffered: 10 })).toBeUndefined();
    expect(receiverHeldBytes(undefined)).toBeUndefined();
  });
});
