/**
 * The input budget (limits.bytesPerSecond) of a MessagePack or CBOR connection: the gateway
 * turns each binary frame into JSON text and handles that text, which can be six times the
 * frame's bytes (a string of control characters: one byte each, `\u0001` in the text; `null`
 * from MessagePack's one-byte nil). A binary message costs the larger of its frame's bytes and
 * its text's, at least the floor: a client gets no more handled per budgeted byte by sending
 * binary frames than by sending the same content as JSON text. Counted as the transport hands
 * messages to the session, with a budget that does not refill within the test (1 byte a
 * second): the messages handled before reading pauses are those the burst pays for.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { binaryToText } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import type { Session } from '../../src/server/session.js';
import { DEFAULT_MESSAGE_COST_BYTES } from '../../src/transport/ws-transport.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const FLOOR = DEFAULT_MESSAGE_COST_BYTES;
const MAX_MESSAGE_BYTES = 4096;
/** The burst is 2 × maxMessageBytes. */
const BURST = 2 * MAX_MESSAGE_BYTES;
const MAX_DEPTH = 64;

async function budgetGateway() {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    encodings: ['json', 'msgpack', 'cbor'],
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      maxDepth: MAX_DEPTH,
      // Refills nothing that matters while a test runs: no timing in the counts.
      bytesPerSecond: 1,
      bytesPerSecondPerIp: 0,
      // The model opens a connection per run, more when fast-check shrinks a failure.
      connectionsPerSecondPerIp: 0,
      maxConnectionsPerIp: 10_000,
    },
  });
  running.gateway.method('echo', (params) => params);
  return running;
}

/** A connection offering `protocol`, and the count of messages its session was handed. */
async function connection(running: Awaited<ReturnType<typeof budgetGateway>>, protocol: string) {
  const before = sessionIds(running.gateway);
  const socket = await openSocket(res, running.url, [protocol]);
  expect(socket.protocol).toBe(protocol);
  const replies: Buffer[] = [];
  socket.on('message', (data: Buffer) => replies.push(data));
  const session: Session = newSession(running.gateway, before);
  const transport = session.transport as WsTransport;
  const handled = countHandled(transport);
  return { socket, transport, handled, replies };
}

/** The messages of cost `cost` each that a full burst pays for before reading pauses. */
function paidFor(cost: number): number {
  return Math.floor(BURST / Math.max(cost, FLOOR));
}

const notification = (params: unknown) => ({ jsonrpc: '2.0', method: 'echo', params });

/** Contents whose JSON text is several times their binary frames. */
const EXPANDING: [string, unknown][] = [
  ['600 nulls (one byte each, "null," in the text)', notification(Array(600).fill(null))],
  [
    'a string of 600 U+0001 (one byte each, "\\u0001" in the text)',
    notification('\u0001'.repeat(600)),
  ],
  ['600 empty strings (one byte each, \'"",\' in the text)', notification(Array(600).fill(''))],
];

describe.each([msgpack, cbor])('$name input budget', (codec: WireCodec) => {
  it.each(EXPANDING)(
    'handles no more of %s per budgeted byte than a JSON client sending the same text',
    async (_name, value) => {
      const running = await budgetGateway();
      const frame = codec.encode(value);
      const text = JSON.stringify(value);
      const textBytes = Buffer.byteLength(text);
      // What the gateway reads is that same text.
      expect(binaryToText(codec, frame, MAX_DEPTH)).toBe(text);
      expect(textBytes).toBeGreaterThan(2.5 * frame.length);
      // Enough that even at the frame's bytes each the budget runs out.
      const sent = paidFor(frame.length) + 2;

      const json = await connection(running, 'jsonrpc-2.0');
      for (let i = 0; i < sent; i++) json.socket.send(text);
      await waitUntil(() => json.transport.inputPaused, 'the JSON connection to pause');

      const binary = await connection(running, codec.subprotocol);
      for (let i = 0; i < sent; i++) binary.socket.send(frame);
      await waitUntil(() => binary.transport.inputPaused, 'the binary connection to pause');

      expect(json.handled.count).toBe(paidFor(textBytes));
      expect(binary.handled.count).toBe(json.handled.count);
    },
  );

  it('charges a frame within maxMessageBytes whose text is beyond the burst that text: it waits, and so does what follows', async () => {
    const running = await budgetGateway();
    const value = notification('\u0001'.repeat(MAX_MESSAGE_BYTES - 100));
    const frame = codec.encode(value);
    expect(frame.length).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(Buffer.byteLength(JSON.stringify(value))).toBeGreaterThan(BURST);

    const { socket, transport, handled, replies } = await connection(running, codec.subprotocol);
    socket.send(frame);
    socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await waitUntil(
      () => transport.inputPaused || replies.length > 0,
      'reading to pause or the answer',
    );
    expect(transport.inputPaused).toBe(true);
    expect(handled.count).toBe(0);
  });

  it('closes a frame over maxMessageBytes 1009 before it is converted: nothing is handled', async () => {
    const running = await budgetGateway();
    const frame = codec.encode(notification('\u0001'.repeat(MAX_MESSAGE_BYTES)));
    expect(frame.length).toBeGreaterThan(MAX_MESSAGE_BYTES);
    const { socket, handled } = await connection(running, codec.subprotocol);
    const closed = closeOf(socket);
    socket.send(frame);
    expect((await closed).code).toBe(1009);
    expect(handled.count).toBe(0);
  });

  it('matches a model of the bucket: each message costs its frame or its text, whichever is larger, at least the floor', async () => {
    const running = await budgetGateway();
    const params = fc.oneof(
      fc.jsonValue({ maxDepth: 3, stringUnit: 'binary-ascii' }),
      fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }),
      fc.array(fc.constantFrom(null, 0, true, '', '\u0000'), { maxLength: 600, size: 'max' }),
      fc.string({ unit: fc.constantFrom('\u0001', '"', 'a', 'é'), maxLength: 600, size: 'max' }),
    );
    // Each sent a few times: enough bytes to reach the end of the burst.
    const item = fc.record({ params, times: fc.integer({ min: 1, max: 6 }) });

    /** What the model says: the messages handed to the session before reading pauses, and whether it does. */
    function model(costs: number[]): { handled: number; paused: boolean } {
      let tokens = BURST;
      let handled = 0;
      for (const cost of costs) {
        tokens -= Math.max(cost, FLOOR);
        // The message that takes the budget past its end waits too.
        if (tokens < 0) return { handled, paused: true };
        handled++;
      }
      return { handled, paused: false };
    }

    await fc.assert(
      fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 8 }), async (items) => {
        const frames = items
          .flatMap(({ params, times }) =>
            Array<Uint8Array>(times).fill(codec.encode(notification(params))),
          )
          .filter((frame) => frame.length <= MAX_MESSAGE_BYTES);
        // A final request (priced in the model) tells when everything was read.
        frames.push(codec.encode({ jsonrpc: '2.0', id: 'last', method: 'echo' }));
        const costs = frames.map((frame) =>
          Math.max(frame.length, Buffer.byteLength(binaryToText(codec, frame, MAX_DEPTH))),
        );
        const { socket, transport, handled, replies } = await connection(
          running,
          codec.subprotocol,
        );
        for (const frame of frames) socket.send(frame);
        const expected = model(costs);
        await waitUntil(
          () => transport.inputPaused || replies.length > 0,
          'reading to pause or the last answer',
        );
        expect(transport.inputPaused).toBe(expected.paused);
        expect(handled.count).toBe(expected.handled);
        socket.terminate();
      }),
      // A failure is reported as found: shrinking it opens a connection for every step.
      { numRuns: 20, endOnFailure: true },
    );
  }, 60_000);
});
