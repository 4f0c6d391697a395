/**
 * Held WebSocket input is handed over in turns: the messages a connection read while reading
 * was paused for its input budget (the rest of a 64 KiB read, paid for already) go to its
 * session at most HELD_MESSAGES_PER_TURN per event-loop turn, all connections together, each
 * connection's in order, none lost. And a connection whose address's budget another connection
 * puts in debt stops reading then, not after a read more of its own.
 *
 * A turn's hand-over is one task: the messages a session is handed between two of the
 * process's nextTick queue runs are those of one task, counted by wrapping each listener.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { HELD_MESSAGES_PER_TURN } from '../../src/transport/input-turns.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { Peak, tapReceive } from '../support/turn-peaks.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 1024;
/**
 * More than the burst (2 × maxMessageBytes): every message takes the budget past its end, so
 * every message after the first of a read waits, and is handed over from what was held.
 */
const MESSAGE_COST_BYTES = 4 * MAX_MESSAGE_BYTES;

/** The most messages handed to sessions in one task, and each connection's ids in order handed. */
class HandOver {
  private readonly peak = new Peak();
  readonly ids = new Map<WsTransport, number[]>();

  get most(): number {
    return this.peak.most;
  }

  watch(transport: WsTransport): void {
    const ids: number[] = [];
    this.ids.set(transport, ids);
    tapReceive(transport, (text) => {
      this.peak.add();
      ids.push((JSON.parse(text) as { id: number }).id);
    });
  }
}

async function turnsGateway(bytesPerSecond: number, messageCostBytes = MESSAGE_COST_BYTES) {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      messageCostBytes,
      bytesPerSecond,
      bytesPerSecondPerIp: bytesPerSecond,
    },
  });
  running.gateway.method('echo', (params) => params);
  return running;
}

type Running = Awaited<ReturnType<typeof turnsGateway>>;

/** Connections opened one after another (each session told from the others), one per count. */
async function connections(running: Running, counts: number[]) {
  const opened = [];
  for (let i = 0; i < counts.length; i++) opened.push(await connection(running));
  return opened;
}

/** A connection from 127.0.0.1 (all of them share its address's budget), its transport, its replies. */
async function connection(running: Running) {
  const before = sessionIds(running.gateway);
  const socket = await openSocket(res, running.url);
  const replies: number[] = [];
  socket.on('message', (data) =>
    replies.push((JSON.parse((data as Buffer).toString('utf8')) as { id: number }).id),
  );
  const transport = newSession(running.gateway, before).transport as WsTransport;
  return { socket, transport, replies };
}

function sendEchoes(socket: WebSocket, count: number): void {
  for (let id = 1; id <= count; id++) {
    socket.send(`{"jsonrpc":"2.0","method":"echo","params":[${id}],"id":${id}}`);
  }
}

const range = (count: number) => Array.from({ length: count }, (_, i) => i + 1);

describe('held WebSocket input, handed over in turns', () => {
  it('hands several connections of one address their held messages at most HELD_MESSAGES_PER_TURN a task, each in order', async () => {
    // 1,000 messages of 4 KiB each: a connection owes 4 MiB, paid in 60 ms.
    const running = await turnsGateway(64 * 1024 * 1024);
    const counts = [1000, 700, 1000];
    const opened = await connections(running, counts);
    const handOver = new HandOver();
    for (const { transport } of opened) handOver.watch(transport);
    opened.forEach(({ socket }, i) => sendEchoes(socket, counts[i]!));
    for (const [i, { socket, replies }] of opened.entries()) {
      await waitUntil(() => replies.length === counts[i], 'every reply', 30_000);
      expect(replies).toEqual(range(counts[i]!));
      socket.terminate();
    }
    for (const [i, { transport }] of opened.entries()) {
      expect(handOver.ids.get(transport)).toEqual(range(counts[i]!));
    }
    expect(handOver.most).toBeGreaterThan(0);
    expect(handOver.most).toBeLessThanOrEqual(HELD_MESSAGES_PER_TURN);
  }, 60_000);

  it('matches the model: any connections, any counts, each handed all its messages in order, at most HELD_MESSAGES_PER_TURN a task', async () => {
    const running = await turnsGateway(64 * 1024 * 1024);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 1200 }), { minLength: 1, maxLength: 4 }),
        async (counts) => {
          const opened = await connections(running, counts);
          const handOver = new HandOver();
          for (const { transport } of opened) handOver.watch(transport);
          opened.forEach(({ socket }, i) => sendEchoes(socket, counts[i]!));
          for (const [i, { replies }] of opened.entries()) {
            await waitUntil(() => replies.length === counts[i], 'every reply', 30_000);
            expect(replies).toEqual(range(counts[i]!));
          }
          for (const [i, { socket, transport }] of opened.entries()) {
            expect(handOver.ids.get(transport)).toEqual(range(counts[i]!));
            socket.terminate();
          }
          expect(handOver.most).toBeLessThanOrEqual(HELD_MESSAGES_PER_TURN);
        },
      ),
      { numRuns: 12 },
    );
  }, 120_000);

  it("stops a connection's reading when another connection of its address puts the address's budget in debt", async () => {
    // Refills nothing that matters while the test runs; a message costs the default floor.
    const running = await turnsGateway(1, 256);
    const quiet = await connection(running);
    const flooding = await connection(running);
    // Its budget made (a message read), within the burst: it reads on.
    sendEchoes(quiet.socket, 1);
    await waitUntil(() => quiet.replies.length === 1, 'the answer');
    expect(quiet.transport.inputPaused).toBe(false);
    // 8 × 256 bytes: the address's 2 KiB burst, less the quiet connection's 256, is spent.
    sendEchoes(flooding.socket, 8);
    await waitUntil(() => flooding.transport.inputPaused, 'the flooding connection to pause');
    expect(quiet.transport.inputPaused).toBe(true);
  });
});
