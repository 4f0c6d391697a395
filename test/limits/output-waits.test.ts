/**
 * What sessions send past a turn's output allowance waits for later turns: once the text frames
 * sent in an event-loop turn reach OUTPUT_CHARS_PER_TURN, a connection's frames wait for output
 * turns, in order, each turn writing (and making: an async handler's reply is made as it is
 * written) at most the allowance and the frame that passes it. Async handlers that settle
 * together, whose replies were all made and written in the one turn they settled in, are
 * answered a few per turn; a close asked for meanwhile goes after what was sent before it; a
 * connection whose output waits is not read until it has been written.
 *
 * A batch's reply is one message: its members' replies are made as its pieces are written, a
 * turn's worth at a time, the message in WebSocket fragments (an NDJSON line in parts) past it.
 *
 * A reply is counted as it is made: its result's toJSON runs as JSON.stringify makes its text.
 * A turn is one task (between two runs of the process's nextTick queue).
 */
import type { Socket } from 'node:net';
import fc from 'fast-check';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';
import { OUTPUT_CHARS_PER_TURN } from '../../src/transport/input-turns.js';
import { WsTransport } from '../../src/transport/ws-transport.js';
import { Resources } from '../support/resources.js';
import { ANSWER_CHARS, CALLS, MOST_PER_TURN, counted } from '../support/output-turns.js';
import { Peak } from '../support/turn-peaks.js';
import { closeOf, openSocket, tcpLines } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

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
    const { socket, lines } = await tcpLines(res, address.port);
    socket.write(Array.from({ length: CALLS }, (_, i) => `${request(i + 1)}\n`).join(''));
    await waitUntil(() => lines.length === CALLS, 'every answer');
    const ids = lines.map((line) => (JSON.parse(line) as { id: number }).id);
    expect(ids).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    expect(made.most).toBeGreaterThan(0);
    expect(made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
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

/** A gateway whose `big` (and async `bigAsync`) answers `chars` characters, counted as made. */
async function sizedGateway(options: Parameters<Resources['gateway']>[0] = {}) {
  const running = await res.gateway({ heartbeatIntervalMs: 0, ...options });
  const made = new Peak();
  running.gateway.method('big', (params) => counted(made, (params as [number])[0]));
  running.gateway.method('bigAsync', async (params) =>
    Promise.resolve(counted(made, (params as [number])[0])),
  );
  return { ...running, made };
}

const batchOf = (calls: { async: boolean; chars: number }[]) =>
  JSON.stringify(
    calls.map((c, id) => ({
      jsonrpc: '2.0',
      id,
      method: c.async ? 'bigAsync' : 'big',
      params: [c.chars],
    })),
  );

/** The ids of a batch reply's members, and each member's result length. */
function members(text: string): { id: number; chars: number }[] {
  return (JSON.parse(text) as { id: number; result: string }[]).map((m) => ({
    id: m.id,
    chars: m.result.length,
  }));
}

const calls = (async: boolean) =>
  Array.from({ length: CALLS }, () => ({ async, chars: ANSWER_CHARS }));
const expected = Array.from({ length: CALLS }, (_, id) => ({ id, chars: ANSWER_CHARS }));

describe('a batch’s reply past a turn’s allowance', () => {
  for (const async of [false, true]) {
    it(`is made a turn’s worth at a time and arrives whole on the WebSocket (${async ? 'async' : 'plain'} handlers)`, async () => {
      const running = await sizedGateway();
      const socket = await openSocket(res, running.url);
      const replies: string[] = [];
      socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
      socket.send(batchOf(calls(async)));
      await waitUntil(() => replies.length === 1, 'the batch reply');
      expect(members(replies[0]!)).toEqual(expected);
      expect(running.made.most).toBeGreaterThan(0);
      expect(running.made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
    });
  }

  it('is made a turn’s worth at a time and arrives as one line on TCP', async () => {
    const running = await sizedGateway();
    const address = await running.gateway.listenTcp(0, '127.0.0.1');
    const { socket, lines } = await tcpLines(res, address.port);
    socket.write(`${batchOf(calls(false))}\n${request(99, 'big', [3])}\n`);
    await waitUntil(() => lines.length === 2, 'both replies');
    expect(members(lines[0]!)).toEqual(expected);
    expect(JSON.parse(lines[1]!)).toEqual({ jsonrpc: '2.0', id: 99, result: 'xxx' });
    expect(running.made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('arrives whole with permessage-deflate, and in a binary encoding', async () => {
    const running = await sizedGateway({
      perMessageDeflate: { threshold: 0 },
      encodings: ['json', 'msgpack'],
    });
    const deflated = await openSocket(res, running.url, undefined, {
      perMessageDeflate: { threshold: 0 },
    });
    expect(deflated.extensions.includes('permessage-deflate')).toBe(true);
    const texts: string[] = [];
    deflated.on('message', (data) => texts.push((data as Buffer).toString('utf8')));
    deflated.send(batchOf(calls(false)));
    await waitUntil(() => texts.length === 1, 'the compressed batch reply');
    expect(members(texts[0]!)).toEqual(expected);

    const binary = await openSocket(res, running.url, [msgpack.subprotocol]);
    const decoded: unknown[] = [];
    binary.on('message', (data) => decoded.push(msgpack.decode(data as Buffer)));
    binary.send(msgpack.encode(JSON.parse(batchOf(calls(true)))));
    await waitUntil(() => decoded.length === 1, 'the msgpack batch reply');
    expect(members(JSON.stringify(decoded[0]))).toEqual(expected);
  });
});

describe('a batch’s reply in a binary encoding', () => {
  for (const [codec, deflate] of [
    [msgpack, false],
    [cbor, false],
    [msgpack, true],
    [cbor, true],
  ] as const) {
    it(`is converted a turn’s worth at a time, member by member, and arrives whole (${codec.name}${deflate ? ', deflate' : ''})`, async () => {
      const running = await sizedGateway({
        encodings: ['json', codec.name],
        ...(deflate ? { perMessageDeflate: { threshold: 0 } } : {}),
      });
      // One member the codec cannot carry (a lone surrogate): answered -32603 in its place.
      running.gateway.method('lone', () => 'a\ud800');
      const socket = await openSocket(
        res,
        running.url,
        [codec.subprotocol],
        deflate ? { perMessageDeflate: { threshold: 0 } } : {},
      );
      const decoded: unknown[] = [];
      socket.on('message', (data) => decoded.push(codec.decode(data as Buffer)));
      const batch = JSON.parse(batchOf(calls(true))) as { id: number }[];
      batch.splice(5, 0, { jsonrpc: '2.0', id: 500, method: 'lone' } as never);
      socket.send(codec.encode(batch));
      await waitUntil(() => decoded.length === 1, 'the batch reply');
      const reply = decoded[0] as { id: number; result?: string; error?: { code: number } }[];
      expect(reply[5]).toMatchObject({ id: 500, error: { code: -32603 } });
      reply.splice(5, 1);
      expect(reply.map((m) => ({ id: m.id, chars: m.result!.length }))).toEqual(expected);
      expect(running.made.most).toBeGreaterThan(0);
      expect(running.made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
    });
  }
});

describe('what waits, held to its promises', () => {
  it('answers a batch’s members as their handlers returned them while the batch fits a turn', async () => {
    const running = await res.gateway({ heartbeatIntervalMs: 0 });
    const state = { n: 0 };
    running.gateway.method('get', () => state);
    running.gateway.method('inc', () => ++state.n);
    const socket = await openSocket(res, running.url);
    const replies: string[] = [];
    socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
    socket.send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'get' },
        { jsonrpc: '2.0', id: 2, method: 'inc' },
      ]),
    );
    await waitUntil(() => replies.length === 1, 'the batch reply');
    expect(JSON.parse(replies[0]!)).toEqual([
      { jsonrpc: '2.0', id: 1, result: { n: 0 } },
      { jsonrpc: '2.0', id: 2, result: 1 },
    ]);
  });

  it('keeps the node’s output budget told of a batch reply written in fragments', async () => {
    const running = await res.gateway({
      heartbeatIntervalMs: 0,
      limits: { maxBufferedBytesTotal: 2 ** 31, maxBufferedBytes: 2 ** 30 },
    });
    running.gateway.method('big', () => 'x'.repeat(ANSWER_CHARS));
    // After each output turn's part: what the ledger holds for the connection, and what it has.
    const samples: { budgeted: number; actual: number }[] = [];
    let written = false;
    const prototype = WsTransport.prototype as unknown as {
      writeWaiting: (this: WsTransport) => boolean;
    };
    const writeWaiting = prototype.writeWaiting;
    prototype.writeWaiting = function (this: WsTransport) {
      const done = writeWaiting.call(this);
      samples.push({ budgeted: this.budgeted, actual: this.budgetBytes });
      written ||= done;
      return done;
    };
    try {
      const socket = await openSocket(res, running.url);
      (socket as unknown as { _socket: Socket })._socket.pause(); // never reads
      socket.send(
        JSON.stringify(
          Array.from({ length: CALLS }, (_, id) => ({ jsonrpc: '2.0', id, method: 'big' })),
        ),
      );
      await waitUntil(() => written, 'the whole reply written');
    } finally {
      prototype.writeWaiting = writeWaiting;
    }
    // The ledger may count more than a connection holds, never less.
    expect(samples.length).toBeGreaterThan(1);
    for (const { budgeted, actual } of samples) expect(budgeted).toBeGreaterThanOrEqual(actual);
  });

  for (const transport of ['WebSocket', 'TCP'] as const) {
    it(`sends a close asked for while notifications wait after them, on ${transport}`, async () => {
      const { parts, code } = await burstThenClose(transport, 4000);
      expect(code).toBe(4000);
      expect(parts).toEqual(Array.from({ length: CALLS }, (_, i) => i + 1));
    });

    it(`drops what waits when shedding (1013) on ${transport}, rather than send it first`, async () => {
      const { parts, code } = await burstThenClose(transport, 1013);
      expect(code).toBe(1013);
      // What the turn allowed went; what waited did not.
      expect(parts).toEqual(Array.from({ length: parts.length }, (_, i) => i + 1));
      expect(parts.length).toBeLessThan(CALLS);
    });
  }
});

/**
 * A call whose handler sends CALLS notifications of ANSWER_CHARS each (more than a turn's
 * output), then closes its session with `closeCode`: the notifications' numbers the client got,
 * in order, and the close code it got (on TCP, the close notice's, the last line).
 */
async function burstThenClose(
  transport: 'WebSocket' | 'TCP',
  closeCode: number,
): Promise<{ parts: number[]; code: number | undefined }> {
  const running = await res.gateway({ heartbeatIntervalMs: 0 });
  const answer = 'x'.repeat(ANSWER_CHARS);
  running.gateway.method('burst', (_params, ctx) => {
    for (let n = 1; n <= CALLS; n++) ctx.session.notify('part', [n, answer]);
    ctx.session.close(closeCode, 'closing');
    return null;
  });
  const parts: number[] = [];
  const seen = (message: { method?: string; params?: unknown }): void => {
    if (message.method === 'part') parts.push((message.params as [number])[0]);
  };
  if (transport === 'WebSocket') {
    const socket = await openSocket(res, running.url);
    socket.on('message', (data) => seen(JSON.parse((data as Buffer).toString('utf8')) as never));
    const closed = closeOf(socket);
    socket.send(request(1, 'burst'));
    return { parts, code: (await closed).code };
  }
  const address = await running.gateway.listenTcp(0, '127.0.0.1');
  const { socket, lines } = await tcpLines(res, address.port);
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`${request(1, 'burst')}\n`);
  await ended;
  const messages = lines.map((line) => JSON.parse(line) as { method?: string; params?: unknown });
  messages.forEach(seen);
  const notice = messages.at(-1);
  const code =
    notice?.method === 'rpc.close' ? (notice.params as { code: number }).code : undefined;
  return { parts, code };
}

describe('output past a turn’s allowance (model)', () => {
  it('answers every call, each connection’s in order, no task making more than the allowance and one reply', async () => {
    // Each run opens connections (more while fast-check shrinks a failure).
    const running = await sizedGateway({
      limits: { connectionsPerSecondPerIp: 0, maxConnectionsPerIp: 10_000 },
    });
    const call = fc.record({ chars: fc.integer({ min: 1, max: 600_000 }), async: fc.boolean() });
    // A connection sends its calls pipelined, or as one batch.
    const connection = fc.record({
      batch: fc.boolean(),
      calls: fc.array(call, { minLength: 1, maxLength: 12 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(connection, { minLength: 1, maxLength: 3 }), async (plans) => {
        running.made.most = 0;
        const sockets: WebSocket[] = [];
        for (let i = 0; i < plans.length; i++) sockets.push(await openSocket(res, running.url));
        const received = sockets.map((socket) => {
          const texts: string[] = [];
          socket.on('message', (data) => texts.push((data as Buffer).toString('utf8')));
          return texts;
        });
        plans.forEach(({ batch, calls }, i) => {
          if (batch) return sockets[i]!.send(batchOf(calls));
          sendAtOnce(
            sockets[i]!,
            calls.map((c, id) => request(id, c.async ? 'bigAsync' : 'big', [c.chars])),
          );
        });
        await waitUntil(
          () =>
            plans.every(
              ({ batch, calls }, i) => received[i]!.length === (batch ? 1 : calls.length),
            ),
          'every answer',
        );
        plans.forEach(({ batch, calls }, i) => {
          const answered = batch
            ? members(received[i]![0]!)
            : received[i]!.map((text) => {
                const m = JSON.parse(text) as { id: number; result: string };
                return { id: m.id, chars: m.result.length };
              });
          // Every call answered once, with its result; a batch's members in order, and
          // pipelined calls of one kind in the order they were sent (a plain handler's reply
          // may pass an async one still settling).
          const sent = calls.map((c, id) => ({ id, chars: c.chars }));
          expect([...answered].sort((a, b) => a.id - b.id)).toEqual(sent);
          if (batch) expect(answered).toEqual(sent);
          for (const async of [false, true]) {
            const ids = calls.flatMap((c, id) => (c.async === async ? [id] : []));
            expect(answered.map((a) => a.id).filter((id) => ids.includes(id))).toEqual(ids);
          }
        });
        const largest = Math.max(...plans.flatMap((p) => p.calls.map((c) => c.chars)));
        expect(running.made.most).toBeLessThanOrEqual(OUTPUT_CHARS_PER_TURN + largest);
        for (const socket of sockets) socket.close();
      }),
      { numRuns: 12 },
    );
  }, 60_000);
});
