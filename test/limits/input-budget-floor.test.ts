/**
 * limits.messageCostBytes: every message a WebSocket connection sends costs its input budget
 * at least this many bytes, however few it carries (an empty frame, a pong, a ping), and each
 * member of a batch after the first costs it once more. Counted as the transport hands messages
 * to the session: with a budget that does not refill within the test (1 byte a second), the
 * messages handled before reading pauses are those the burst pays for, at the floor each.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveLimits } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { DEFAULT_MESSAGE_COST_BYTES } from '../../src/transport/ws-transport.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const FLOOR = DEFAULT_MESSAGE_COST_BYTES;
const MAX_MESSAGE_BYTES = 1024;
/** The burst is 2 × maxMessageBytes. */
const BURST = 2 * MAX_MESSAGE_BYTES;
/** How many messages of the floor the burst pays for. */
const AT_FLOOR = BURST / FLOOR;

async function floorGateway(messageCostBytes?: number) {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      ...(messageCostBytes === undefined ? {} : { messageCostBytes }),
      maxMessageBytes: MAX_MESSAGE_BYTES,
      // Refills nothing that matters while a test runs: no timing in the counts.
      bytesPerSecond: 1,
      bytesPerSecondPerIp: 0,
    },
  });
  running.gateway.method('echo', (params) => params);
  return running;
}

/** A connection to the gateway, and the count of messages its session was handed. */
async function connection(running: Awaited<ReturnType<typeof floorGateway>>) {
  const before = sessionIds(running.gateway);
  const socket = await openSocket(res, running.url);
  const replies: string[] = [];
  socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
  const session: Session = newSession(running.gateway, before);
  const transport = session.transport as WsTransport;
  const handled = countHandled(transport);
  return { socket, transport, handled, replies };
}

describe('limits.messageCostBytes (WebSocket input budget floor)', () => {
  it('charges an empty text frame the floor: the burst pays for burst / floor of them', async () => {
    const running = await floorGateway();
    const { socket, transport, handled, replies } = await connection(running);
    for (let i = 0; i < 3 * AT_FLOOR; i++) socket.send('');
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    expect(handled.count).toBe(AT_FLOOR);
    await waitUntil(() => replies.length === AT_FLOOR, 'the answers to what was handled');
    // Each answered -32700, as a text that is not JSON is.
    for (const reply of replies) {
      expect(JSON.parse(reply)).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32700, message: 'Parse error' },
      });
    }
  });

  it('charges the floor the gateway is given, not the default', async () => {
    const running = await floorGateway(2 * FLOOR);
    const { socket, transport, handled } = await connection(running);
    for (let i = 0; i < 3 * AT_FLOOR; i++) socket.send('');
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    expect(handled.count).toBe(AT_FLOOR / 2);
  });

  it('charges a pong the peer sends unasked the floor, and what follows waits', async () => {
    const running = await floorGateway();
    const paying = await connection(running);
    // The burst pays for this many pongs and a small request.
    for (let i = 0; i < AT_FLOOR - 1; i++) paying.socket.pong();
    paying.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await waitUntil(() => paying.replies.length === 1, 'the answer');
    expect(paying.transport.inputPaused).toBe(false);

    const flooding = await connection(running);
    for (let i = 0; i < AT_FLOOR + 1; i++) flooding.socket.pong();
    flooding.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await waitUntil(() => flooding.transport.inputPaused, 'reading to pause');
    expect(flooding.handled.count).toBe(0);
  });

  it('charges a ping the peer sends the floor', async () => {
    const running = await floorGateway();
    const { socket, transport, handled } = await connection(running);
    for (let i = 0; i < AT_FLOOR + 1; i++) socket.ping();
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    expect(handled.count).toBe(0);
  });

  it('charges a batch the floor once per member: one of burst / floor members answers, the next message waits', async () => {
    const running = await floorGateway();
    const invalid = (members: number) => `[${Array<string>(members).fill('1').join(',')}]`;

    const paid = await connection(running);
    paid.socket.send(invalid(AT_FLOOR));
    await waitUntil(() => paid.replies.length === 1, 'the batch answer');
    expect(JSON.parse(paid.replies[0]!)).toHaveLength(AT_FLOOR);
    expect(paid.transport.inputPaused).toBe(false);

    const over = await connection(running);
    over.socket.send(invalid(AT_FLOOR + 1));
    over.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] }));
    await waitUntil(() => over.transport.inputPaused, 'reading to pause');
    // The batch was handled (it was read before it was counted); the request waits.
    expect(over.handled.count).toBe(1);
    await waitUntil(() => over.replies.length === 1, 'the batch answer');
    expect(JSON.parse(over.replies[0]!)).toHaveLength(AT_FLOOR + 1);
  });

  it('matches a model of the bucket: texts of any size, batches, pongs and pings', async () => {
    const running = await floorGateway();
    type Item =
      | { kind: 'text'; bytes: number }
      | { kind: 'batch'; members: number }
      | { kind: 'pong' | 'ping'; bytes: number };
    const item: fc.Arbitrary<Item> = fc.oneof(
      fc.record({ kind: fc.constant('text' as const), bytes: fc.integer({ min: 0, max: 700 }) }),
      fc.record({ kind: fc.constant('batch' as const), members: fc.integer({ min: 1, max: 12 }) }),
      fc.record({
        kind: fc.constantFrom('pong' as const, 'ping' as const),
        bytes: fc.integer({ min: 0, max: 125 }),
      }),
    );
    const batchText = (members: number) => `[${Array<string>(members).fill('1').join(',')}]`;

    /** What the model says: the messages handed to the session before reading pauses, and whether it does. */
    function model(items: Item[]): { handled: number; paused: boolean } {
      let tokens = BURST;
      let handled = 0;
      for (const it of items) {
        if (it.kind === 'text' || it.kind === 'batch') {
          const bytes = it.kind === 'text' ? it.bytes : batchText(it.members).length;
          tokens -= Math.max(bytes, FLOOR);
          // The message that takes the budget past its end waits too.
          if (tokens < 0) return { handled, paused: true };
          handled++;
          if (it.kind === 'batch') tokens -= (it.members - 1) * FLOOR;
        } else tokens -= Math.max(it.bytes, FLOOR);
        if (tokens < 0) return { handled, paused: true };
      }
      return { handled, paused: false };
    }

    await fc.assert(
      fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 14 }), async (items) => {
        const { socket, transport, handled, replies } = await connection(running);
        // A final request (priced in the model) tells when everything was read.
        const last = JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'echo' });
        const all: Item[] = [...items, { kind: 'text', bytes: last.length }];
        for (const it of items) {
          if (it.kind === 'text') socket.send('x'.repeat(it.bytes));
          else if (it.kind === 'batch') socket.send(batchText(it.members));
          else if (it.kind === 'pong') socket.pong(Buffer.alloc(it.bytes, 1));
          else socket.ping(Buffer.alloc(it.bytes, 1));
        }
        socket.send(last);
        const expected = model(all);
        if (expected.paused) {
          await waitUntil(() => transport.inputPaused, 'reading to pause');
        } else {
          await waitUntil(() => replies.some((r) => r.includes('"last"')), 'the last answer');
          expect(transport.inputPaused).toBe(false);
        }
        expect(handled.count).toBe(expected.handled);
        socket.terminate();
      }),
      { numRuns: 25 },
    );
  }, 60_000);

  it('is an option of its own, 0 for no floor', () => {
    expect(resolveLimits({}).messageCostBytes).toBe(256);
    expect(resolveLimits({ messageCostBytes: 0 }).messageCostBytes).toBe(0);
    expect(() => resolveLimits({ messageCostBytes: -1 })).toThrow(
      'limits.messageCostBytes must be an integer at least 0, not -1',
    );
  });
});
