/**
 * What sessions send past a turn's output allowance waits for later turns: once the text frames
 * sent in an event-loop turn reach OUTPUT_CHARS_PER_TURN, a connection's frames wait for output
 * turns, in order, each turn writing (and making: an async handler's reply is made as it is
 * written) at most the allowance and the frame that passes it. Async handlers that settle
 * together, whose replies were all made and written in the one turn they settled in, are
 * answered a few per turn; a close asked for meanwhile goes after what was sent before it; a
 * connection whose output waits is not read until it has been written.
 *
 * A reply is counted as it is made: its result's toJSON runs as JSON.stringify makes its text.
 * A turn is one task (between two runs of the process's nextTick queue).
 */
import { Socket } from 'node:net';
import fc from 'fast-check';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { OUTPUT_CHARS_PER_TURN } from '../../src/transport/input-turns.js';
import { Resources } from '../support/resources.js';
import { Peak } from '../support/turn-peaks.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const ANSWER_CHARS = 300_000;
const CALLS = 24;
/** The replies one turn may make: those within the allowance, and the one that passes it. */
const MOST_PER_TURN = Math.floor(OUTPUT_CHARS_PER_TURN / ANSWER_CHARS) + 1;

/** A result whose text is `chars` characters, counted in `made` as its reply is made. */
function counted(made: Peak, chars: number): unknown {
  return {
    toJSON() {
      made.add(chars);
      return 'x'.repeat(chars);
    },
  };
}

const request = (id: number, method = 'big', params?: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

/** Send `texts` in one write: the gateway reads them all at once. */
function sendAtOnce(socket: WebSocket, texts: string[]): void {
  const raw = (socket as unknown as { _socket: Socket })._socket;
  raw.cork();
  for (const text of texts) socket.send(text);
  raw.uncork();
}

function idsOf(socket: WebSocket): number[] {
  const ids: number[] = [];
  socket.on('message', (data) =>
    ids.push((JSON.parse((data as Buffer).toString('utf8')) as { id: number }).id),
  );
  return ids;
}

async function tcpLines(port: number): Promise<{ socket: Socket; lines: string[] }> {
  const socket = new Socket();
  res.netSockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.connect(port, '127.0.0.1', resolve);
  });
  let text = '';
  const lines: string[] = [];
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    let end: number;
    while ((end = text.indexOf('\n')) >= 0) {
      lines.push(text.slice(0, end));
      text = text.slice(end + 1);
    }
  });
  return { socket, lines };
}

describe('output past a turn’s allowance', () => {
  it('makes and writes async handlers’ replies a turn’s worth at a time on the WebSocket', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const made = new Peak();
    running.gateway.method('big', async () => Promise.resolve(counted(made, ANSWER_CHARS)));
    const socket = await openSocket(res, running.url);
    const ids = idsOf(socket);
    sendAtOnce(
      socket,
      Array.from({ length: CALLS }, (_, i) => request(i + 1)),
    );
    await waitUntil(() => ids.length === CALLS, 'every answer');
    expect(ids).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    expect(made.most).toBeGreaterThan(0);
    expect(made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('makes and writes async handlers’ replies a turn’s worth at a time on TCP', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const made = new Peak();
    running.gateway.method('big', async () => Promise.resolve(counted(made, ANSWER_CHARS)));
    const address = await running.gateway.listenTcp(0, '127.0.0.1');
    const { socket, lines } = await tcpLines(address.port);
    socket.write(Array.from({ length: CALLS }, (_, i) => `${request(i + 1)}\n`).join(''));
    await waitUntil(() => lines.length === CALLS, 'every answer');
    const ids = lines.map((line) => (JSON.parse(line) as { id: number }).id);
    expect(ids).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    expect(made.most).toBeGreaterThan(0);
    expect(made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('sends a close asked for while notifications wait after them, on the WebSocket', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const answer = 'x'.repeat(ANSWER_CHARS);
    running.gateway.method('burst', (_params, ctx) => {
      for (let n = 1; n <= CALLS; n++) ctx.session.notify('part', [n, answer]);
      ctx.session.close(4000, 'done');
      return null;
    });
    const socket = await openSocket(res, running.url);
    const parts: number[] = [];
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as { params: [number] };
      parts.push(message.params[0]);
    });
    const closed = closeOf(socket);
    socket.send(request(1, 'burst'));
    const { code } = await closed;
    expect(code).toBe(4000);
    expect(parts).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
  });

  it('sends a close asked for while notifications wait after them, on TCP', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const answer = 'x'.repeat(ANSWER_CHARS);
    running.gateway.method('burst', (_params, ctx) => {
      for (let n = 1; n <= CALLS; n++) ctx.session.notify('part', [n, answer]);
      ctx.session.close(4000, 'done');
      return null;
    });
    const address = await running.gateway.listenTcp(0, '127.0.0.1');
    const { socket, lines } = await tcpLines(address.port);
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`${request(1, 'burst')}\n`);
    await ended;
    const parts = lines
      .map((line) => JSON.parse(line) as { method?: string; params?: [number] })
      .filter((message) => message.method === 'part')
      .map((message) => message.params![0]);
    expect(parts).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    // The close notice is the last line.
    expect(lines.at(-1)).toContain('4000');
  });

  it('reads no more of a connection whose output waits until it is written', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const answer = 'x'.repeat(ANSWER_CHARS);
    // `fill` sends three turns' worth: what passes its own turn's allowance waits for two
    // output turns, in the next two turns of the event loop.
    let turnsSinceFill = 0;
    running.gateway.method('fill', (_params, ctx) => {
      for (let n = 0; n < 3 * MOST_PER_TURN; n++) ctx.session.notify('part', [answer]);
      setImmediate(() => {
        turnsSinceFill = 1;
        setImmediate(() => (turnsSinceFill = 2));
      });
      return null;
    });
    const seenAt: number[] = [];
    running.gateway.method('tick', () => {
      seenAt.push(turnsSinceFill);
      return null;
    });
    const socket = await openSocket(res, running.url);
    const ids: number[] = [];
    let parts = 0;
    const partsAt: number[] = [];
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as { id?: number };
      if (message.id === undefined) parts++;
      else {
        ids.push(message.id);
        partsAt.push(parts);
      }
    });
    sendAtOnce(socket, [
      request(1, 'fill'),
      ...Array.from({ length: 8 }, (_, i) => request(i + 2, 'tick')),
    ]);
    await waitUntil(() => ids.length === 9, 'every answer');
    expect(ids).toEqual(Array.from({ length: 9 }, (_, i) => i + 1));
    // Read with `fill`, the ticks are handed over only once its notifications are written.
    expect(seenAt.every((turn) => turn === 2)).toBe(true);
    expect(partsAt.slice(1).every((n) => n === 3 * MOST_PER_TURN)).toBe(true);
  });
});

describe('output past a turn’s allowance (model)', () => {
  it('answers every call, each connection’s in order, no task making more than the allowance and one reply', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const made = new Peak();
    running.gateway.method('sized', (params) => {
      const [chars] = params as [number];
      return counted(made, chars);
    });
    running.gateway.method('sizedAsync', async (params) => {
      const [chars] = params as [number];
      return Promise.resolve(counted(made, chars));
    });
    const call = fc.record({ chars: fc.integer({ min: 1, max: 600_000 }), async: fc.boolean() });
    const connection = fc.array(call, { minLength: 1, maxLength: 12 });
    await fc.assert(
      fc.asyncProperty(fc.array(connection, { minLength: 1, maxLength: 3 }), async (plans) => {
        made.most = 0;
        const sockets: WebSocket[] = [];
        for (let i = 0; i < plans.length; i++) sockets.push(await openSocket(res, running.url));
        const answered = sockets.map(idsOf);
        plans.forEach((calls, i) =>
          sendAtOnce(
            sockets[i]!,
            calls.map((c, id) => request(id, c.async ? 'sizedAsync' : 'sized', [c.chars])),
          ),
        );
        await waitUntil(
          () => plans.every((calls, i) => answered[i]!.length === calls.length),
          'every answer',
        );
        // Every call answered once; those of one kind in the order they were sent (a sync
        // reply may pass an async one still settling).
        plans.forEach((calls, i) => {
          expect([...answered[i]!].sort((a, b) => a - b)).toEqual(calls.map((_, id) => id));
          for (const async of [false, true]) {
            const sent = calls.flatMap((c, id) => (c.async === async ? [id] : []));
            expect(answered[i]!.filter((id) => sent.includes(id))).toEqual(sent);
          }
        });
        const largest = Math.max(...plans.flat().map((c) => c.chars));
        expect(made.most).toBeLessThanOrEqual(OUTPUT_CHARS_PER_TURN + largest);
        for (const socket of sockets) socket.close();
      }),
      { numRuns: 12 },
    );
  }, 60_000);
});
