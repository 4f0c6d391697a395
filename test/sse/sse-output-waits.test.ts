/**
 * An HTTP streaming session's output takes the output turns a connection's does
 * (test/limits/output-waits.test.ts): once the text sent in a turn reaches
 * OUTPUT_CHARS_PER_TURN its events wait, in order, and output turns write them a turn's worth at
 * a time; an async handler's reply is made as it is written; a batch's reply is one event made
 * member by member, written in parts past a turn (its `data:` line open, no heartbeat comment
 * inside it, the whole event sent again on a stream that replaced the one it began on); a close
 * goes after what waits; a POST is read only once the session's output waits no more.
 *
 * A reply is counted as it is made: its result's toJSON runs as JSON.stringify makes its text.
 */
import { createServer, type ServerResponse } from 'node:http';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { SseTransport } from '../../src/transport/sse-transport.js';
import type { PieceSource } from '../../src/transport/transport.js';
import { listenOnLoopback } from '../support/network.js';
import { Resources } from '../support/resources.js';
import {
  ANSWER_CHARS,
  CALLS,
  MOST_PER_TURN,
  counted,
  gatedMethod,
} from '../support/output-turns.js';
import { Peak } from '../support/turn-peaks.js';
import { openStream, post, resumeHeaders, type RawStream } from './sse-raw.js';

const res = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await res.cleanup();
});

/** A gateway with an event stream route whose `bigAsync` answers `chars` characters, counted. */
async function sizedGateway() {
  const running = await res.gateway({ routes: { events: '/rpc/events' } });
  const made = new Peak();
  running.gateway.method('bigAsync', async (params) =>
    Promise.resolve(counted(made, (params as [number])[0])),
  );
  const events = `${running.httpUrl}/rpc/events`;
  const stream = await openStream(events);
  cleanups.push(() => stream.destroy());
  return { ...running, made, events, stream };
}

const batchOf = (count: number, chars = ANSWER_CHARS) =>
  JSON.stringify(
    Array.from({ length: count }, (_, id) => ({
      jsonrpc: '2.0',
      id,
      method: 'bigAsync',
      params: [chars],
    })),
  );

/** The ids and result lengths of the messages that are replies. */
function replies(stream: RawStream): { id: number; chars: number }[] {
  return (stream.messages().flat() as { id?: number; result?: string }[])
    .filter((m) => m.id !== undefined)
    .map((m) => ({ id: m.id!, chars: m.result!.length }));
}

describe('an event stream’s output past a turn’s allowance', () => {
  it('makes a batch’s reply a turn’s worth at a time, one event that arrives whole', async () => {
    const running = await sizedGateway();
    const posted = await post(running.events, running.stream.session, batchOf(CALLS));
    expect(posted.status).toBe(202);
    await running.stream.until((events) => events.some((e) => e.event === 'message'));
    expect(running.stream.events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect(replies(running.stream)).toEqual(
      Array.from({ length: CALLS }, (_, id) => ({ id, chars: ANSWER_CHARS })),
    );
    expect(running.made.most).toBeGreaterThan(0);
    expect(running.made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('makes async replies settling together a turn’s worth at a time', async () => {
    const running = await sizedGateway();
    const made = new Peak();
    gatedMethod(running.gateway, CALLS, made);
    const call = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'gated' });
    await Promise.all(
      Array.from({ length: CALLS }, (_, id) =>
        post(running.events, running.stream.session, call(id)),
      ),
    );
    await running.stream.until(() => replies(running.stream).length === CALLS);
    expect(new Set(replies(running.stream).map((r) => r.id)).size).toBe(CALLS);
    expect(made.most).toBeGreaterThan(0);
    expect(made.most).toBeLessThanOrEqual(MOST_PER_TURN * ANSWER_CHARS);
  });

  it('sends a close asked for while output waits after that output', async () => {
    const running = await sizedGateway();
    const answer = 'x'.repeat(ANSWER_CHARS);
    const parts = 3 * MOST_PER_TURN;
    running.gateway.method('fillThenClose', (_params, ctx) => {
      for (let n = 0; n < parts; n++) ctx.session.notify('part', [answer]);
      ctx.session.close(4000, 'done');
      return null;
    });
    await post(
      running.events,
      running.stream.session,
      JSON.stringify({ jsonrpc: '2.0', method: 'fillThenClose' }),
    );
    await running.stream.ended;
    const events = running.stream.events.slice(1);
    expect(events.map((e) => e.event)).toEqual([...Array<string>(parts).fill('message'), 'close']);
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ code: 4000, reason: 'done' });
  });

  it('reads a POST only once the session’s output waits no more', async () => {
    const running = await sizedGateway();
    const answer = 'x'.repeat(ANSWER_CHARS);
    // Thirty output turns' worth: the tick's POST arrives while they are written.
    const parts = 30 * MOST_PER_TURN;
    running.gateway.method('fill', (_params, ctx) => {
      for (let n = 0; n < parts; n++) ctx.session.notify('part', [answer]);
      return null;
    });
    let waitedAtTick: boolean | undefined;
    running.gateway.method('tick', (_params, ctx) => {
      waitedAtTick = (ctx.session.transport as SseTransport).outputWaits();
      return null;
    });
    const message = (method: string) => JSON.stringify({ jsonrpc: '2.0', method, id: method });
    await post(running.events, running.stream.session, message('fill'));
    await post(running.events, running.stream.session, message('tick'));
    await running.stream.until(
      (events) => events.filter((e) => e.event === 'message').length === parts + 2,
    );
    expect(waitedAtTick).toBe(false);
  });
});

/** A source of `count` JSON strings of `chars` characters, as a batch's pieces are given. */
function stringsSource(count: number, chars: number): PieceSource {
  let at = 0;
  const source = {
    made: 0,
    next(): string | undefined {
      if (at >= count) return undefined;
      const piece = (at === 0 ? '[' : ',') + JSON.stringify('y'.repeat(chars));
      at++;
      source.made += piece.length;
      return at === count ? `${piece}]` : piece;
    },
  };
  return source;
}

/**
 * An SseTransport on a real HTTP server: each GET's response is handed to `streams` (the first
 * attached at once) for the test to attach when it likes.
 */
async function transportServer(heartbeatMs: number) {
  const transport = new SseTransport(
    'id',
    'secret',
    { replayBytes: 64 << 20, replayMs: 60_000, graceMs: 60_000, maxBufferedBytes: 0, heartbeatMs },
    { messagesIn: 0, messagesOut: 0 },
    () => undefined,
  );
  transport.listen({ receive: () => undefined, transportClosed: () => undefined });
  const waiting: ((res: ServerResponse) => void)[] = [];
  const server = createServer((req, res) => {
    if (waiting.length > 0) waiting.shift()!(res);
    else transport.attach(res, Number(req.headers['last-event-id'] ?? 0));
  });
  const listening = await listenOnLoopback(server);
  cleanups.push(listening.close);
  cleanups.push(() => transport.close());
  const url = `http://127.0.0.1:${listening.port}/`;
  /** The next GET's response, unattached. */
  const nextResponse = () => new Promise<ServerResponse>((resolve) => waiting.push(resolve));
  return { transport, url, nextResponse };
}

describe('an event in parts', () => {
  it('has no heartbeat comment inside it', async () => {
    const { transport, url } = await transportServer(1);
    const stream = await openStream(url);
    cleanups.push(() => stream.destroy());
    transport.sendPieces(stringsSource(12, ANSWER_CHARS));
    await stream.until((events) => events.some((e) => e.event === 'message'));
    const [batch] = stream.messages() as string[][];
    expect(batch).toHaveLength(12);
    expect(batch!.every((s) => s.length === ANSWER_CHARS)).toBe(true);
  });

  it('goes whole, once, to a stream that replaced the one it began on', async () => {
    const { transport, url, nextResponse } = await transportServer(60_000);
    const first = await openStream(url);
    cleanups.push(() => first.destroy());
    const second = nextResponse();
    const resumed = openStream(url, { headers: resumeHeaders(first.session, 0) });
    const res2 = await second;
    // Its first parts go to the first stream in this turn; the rest wait for output turns.
    transport.sendPieces(stringsSource(12, ANSWER_CHARS));
    expect(transport.outputWaits()).toBe(true);
    transport.attach(res2, 0);
    const stream = await resumed;
    cleanups.push(() => stream.destroy());
    await stream.until((events) => events.some((e) => e.event === 'message'));
    transport.send('{"jsonrpc":"2.0","method":"after"}');
    await stream.until((events) => events.filter((e) => e.event === 'message').length === 2);
    const [batch, after] = stream.messages() as [string[], { method: string }];
    expect(batch).toHaveLength(12);
    expect(after.method).toBe('after');
    expect(stream.events.filter((e) => e.event === 'message').map((e) => e.id)).toEqual(['1', '2']);
    // The first stream was cut with the event open: it never saw a whole event.
    await first.ended;
    expect(first.messages()).toEqual([]);
  });
});

describe('a close while output waits', () => {
  it('goes after what waits; a shed asked for meanwhile drops it and closes at once', async () => {
    const { transport, url } = await transportServer(60_000);
    const stream = await openStream(url);
    cleanups.push(() => stream.destroy());
    // More than a turn's allowance: the last of them wait for output turns.
    for (let n = 1; n <= 5; n++) transport.send(JSON.stringify({ n, pad: 'z'.repeat(450_000) }));
    expect(transport.outputWaits()).toBe(true);
    transport.close(4000, 'done');
    expect(transport.isClosed).toBe(true); // closing: a POST or resume for it gets 404
    transport.close(1013, 'shed');
    await stream.ended;
    const messages = stream.events.filter((e) => e.event === 'message');
    expect(messages.length).toBeLessThan(5);
    expect(JSON.parse(stream.events.at(-1)!.data)).toEqual({ code: 1013, reason: 'shed' });
  });
});

type Op =
  | { kind: 'send'; chars: number }
  | { kind: 'made'; chars: number }
  | { kind: 'pieces'; count: number; chars: number }
  | { kind: 'turn' }
  | { kind: 'resume' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('send' as const), chars: sizes() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('made' as const), chars: sizes() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('pieces' as const),
      count: fc.integer({ min: 1, max: 6 }),
      chars: sizes(),
    }),
    weight: 2,
  },
  { arbitrary: fc.constant({ kind: 'turn' as const }), weight: 2 },
  { arbitrary: fc.constant({ kind: 'resume' as const }), weight: 2 },
);

/** Small, or a large part of a turn's allowance. */
function sizes(): fc.Arbitrary<number> {
  return fc.constantFrom(10, 1000, 200_000, 450_000);
}

describe('an event stream’s events, sent whole, made, in parts, past the allowance (model)', () => {
  it('reach a client that resumes at any point once each, whole, in order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 14 }), async (ops) => {
        const { transport, url } = await transportServer(60_000);
        // What the client read, across its streams: each event's id and the number it carries.
        const read: { id: string | undefined; n: number }[] = [];
        let current = await openStream(url);
        let taken = 0;
        const take = (): void => {
          for (const event of current.events.slice(1 + taken)) {
            if (event.event !== 'message') continue;
            const value = JSON.parse(event.data) as { n: number } | [number, ...string[]];
            read.push({ id: event.id, n: Array.isArray(value) ? value[0] : value.n });
          }
          taken = current.events.length - 1;
        };
        let sent = 0;
        const pad = (chars: number) => 'z'.repeat(chars);
        try {
          for (const next of ops) {
            if (next.kind === 'send') {
              transport.send(JSON.stringify({ n: ++sent, pad: pad(next.chars) }));
            } else if (next.kind === 'made') {
              const n = ++sent;
              transport.sendMade(() => JSON.stringify({ n, pad: pad(next.chars) }));
            } else if (next.kind === 'pieces') {
              const n = ++sent;
              let at = 0;
              const source = {
                made: 0,
                next(): string | undefined {
                  if (at > next.count) return undefined;
                  const piece = at === 0 ? `[${n}` : `,"${pad(next.chars)}"`;
                  at++;
                  source.made += piece.length;
                  return at > next.count ? `${piece}]` : piece;
                },
              };
              transport.sendPieces(source);
            } else if (next.kind === 'turn') {
              await new Promise((resolve) => setImmediate(resolve));
            } else {
              // What the client has read so far is all it has: the stream goes, and it resumes.
              take();
              current.destroy();
              const last = read.at(-1)?.id ?? '0';
              current = await openStream(url, { headers: { 'last-event-id': last } });
              taken = 0;
            }
          }
          await transport.outputWritten();
          // Until the client has read as many events as were sent (on this stream or before).
          await current.until(() => {
            take();
            return read.length >= sent;
          });
          expect(read.map((event) => event.n)).toEqual(
            Array.from({ length: sent }, (_, i) => i + 1),
          );
          expect(read.map((event) => event.id)).toEqual(
            Array.from({ length: sent }, (_, i) => String(i + 1)),
          );
        } finally {
          current.destroy();
          for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
        }
      }),
      { numRuns: 40 },
    );
  }, 180_000);
});
