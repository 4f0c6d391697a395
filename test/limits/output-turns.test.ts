/**
 * What a turn's handed-over messages answer is bounded: once the replies and notifications sent
 * in an event-loop turn reach OUTPUT_CHARS_PER_TURN (all connections together), the messages
 * read after wait for the next turns, in order, none lost. Pipelined calls to a method that
 * answers a large result are made and answered a few per turn, not all in the one turn that read
 * them, on the WebSocket and on TCP.
 *
 * A turn is one task: the calls a handler gets between two of the process's nextTick queue runs
 * are those of one task. The model: connections each send, in one write, calls whose answers
 * are of random sizes; every call is answered, each connection's in order, and no task answers
 * more than the allowance and the one answer that passes it.
 */
import type { Socket } from 'node:net';
import fc from 'fast-check';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { OUTPUT_CHARS_PER_TURN } from '../../src/transport/input-turns.js';
import { Resources } from '../support/resources.js';
import { Peak } from '../support/turn-peaks.js';
import { openSocket, tcpLines } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Each answer's characters: a few answers fill a turn's allowance. */
const ANSWER_CHARS = 300_000;
const CALLS = 24;
/** The calls one turn may make: those within the allowance, and the one that passes it. */
const MOST_PER_TURN = Math.floor(OUTPUT_CHARS_PER_TURN / ANSWER_CHARS) + 1;

/** A gateway whose `big` answers ANSWER_CHARS characters; the most calls it made in one task. */
async function bigGateway() {
  const running = await res.gateway({ heartbeatIntervalMs: 0 });
  const calls = new Peak();
  const answer = 'x'.repeat(ANSWER_CHARS);
  running.gateway.method('big', () => {
    calls.add();
    return answer;
  });
  return { ...running, calls };
}

const request = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'big' });

describe('a turn’s output', () => {
  it('bounds the calls a turn answers on the WebSocket; every call answered in order', async () => {
    const running = await bigGateway();
    const socket = await openSocket(res, running.url);
    const ids: number[] = [];
    socket.on('message', (data) =>
      ids.push((JSON.parse((data as Buffer).toString('utf8')) as { id: number }).id),
    );
    // One write: the gateway reads every call at once.
    const raw = (socket as unknown as { _socket: Socket })._socket;
    raw.cork();
    for (let id = 1; id <= CALLS; id++) socket.send(request(id));
    raw.uncork();
    await waitUntil(() => ids.length === CALLS, 'every answer');
    expect(ids).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    expect(running.calls.most).toBeGreaterThan(0);
    expect(running.calls.most).toBeLessThanOrEqual(MOST_PER_TURN);
  });

  it('bounds the calls a turn answers on TCP; every call answered in order', async () => {
    const running = await bigGateway();
    const address = await running.gateway.listenTcp(0, '127.0.0.1');
    const { socket, lines: answers } = await tcpLines(res, address.port);
    const lines = Array.from({ length: CALLS }, (_, i) => `${request(i + 1)}\n`).join('');
    socket.write(lines);
    await waitUntil(() => answers.length === CALLS, 'every answer');
    const ids = answers.map((line) => (JSON.parse(line) as { id: number }).id);
    expect(ids).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    expect(running.calls.most).toBeGreaterThan(0);
    expect(running.calls.most).toBeLessThanOrEqual(MOST_PER_TURN);
  });
});

describe('a turn’s output (model)', () => {
  it('answers every call in order, no task more than the allowance and one answer', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const task = new Peak();
    running.gateway.method('sized', (params) => {
      const [chars] = params as [number];
      task.add(chars);
      return 'x'.repeat(chars);
    });
    const size = fc.integer({ min: 1, max: 600_000 });
    const connection = fc.array(size, { minLength: 1, maxLength: 12 });
    await fc.assert(
      fc.asyncProperty(fc.array(connection, { minLength: 1, maxLength: 3 }), async (plans) => {
        task.most = 0;
        const sockets: WebSocket[] = [];
        for (let i = 0; i < plans.length; i++) sockets.push(await openSocket(res, running.url));
        const answered = sockets.map((socket) => {
          const ids: number[] = [];
          socket.on('message', (data) =>
            ids.push((JSON.parse((data as Buffer).toString('utf8')) as { id: number }).id),
          );
          return ids;
        });
        plans.forEach((sizes, i) => {
          const raw = (sockets[i] as unknown as { _socket: Socket })._socket;
          raw.cork();
          sizes.forEach((chars, id) =>
            sockets[i]!.send(
              JSON.stringify({ jsonrpc: '2.0', id, method: 'sized', params: [chars] }),
            ),
          );
          raw.uncork();
        });
        await waitUntil(
          () => plans.every((sizes, i) => answered[i]!.length === sizes.length),
          'every answer',
        );
        plans.forEach((sizes, i) => expect(answered[i]).toEqual(sizes.map((_, id) => id)));
        const largest = Math.max(...plans.flat());
        expect(task.most).toBeLessThanOrEqual(OUTPUT_CHARS_PER_TURN + largest);
        for (const socket of sockets) socket.close();
      }),
      { numRuns: 12 },
    );
  }, 60_000);
});
