/**
 * The client's event-stream reader: any cut of a valid stream into chunks reads as the same
 * events as the whole (fast-check), and a large event that arrives in many chunks is scanned
 * once, not once per chunk.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { EventStreamParser, parseEvents, sseSocket } from '../../src/client/sse-transport.js';
import type { SseEvent } from '../../src/client/sse-transport.js';
import type { WebSocketLike } from '../../src/transport/websocket-transport.js';

interface ModelEvent {
  id?: string;
  event?: string;
  data: string[];
  comment?: string;
}

/** A field value: no CR or LF (a value cannot hold a line end), any other character. */
const value = fc.string({ maxLength: 12 }).map((text) => text.replace(/[\r\n]/g, ''));
const lineEnd = fc.constantFrom('\n', '\r\n', '\r');

const modelEvent: fc.Arbitrary<ModelEvent> = fc.record(
  {
    id: value,
    event: value.filter((name) => name !== ''),
    data: fc.array(value, { minLength: 1, maxLength: 4 }),
    comment: value,
  },
  { requiredKeys: ['data'] },
);

/**
 * An event's lines, each ended by the line end `ends` picks for it; then a blank line. A CR
 * followed by a blank line's LF would read as one CRLF: that blank line ends with CRLF instead.
 */
function serialise(event: ModelEvent, ends: () => string, previous: { end: string }): string {
  const lines: string[] = [];
  if (event.comment !== undefined) lines.push(`:${event.comment}`);
  if (event.event !== undefined) lines.push(`event: ${event.event}`);
  if (event.id !== undefined) lines.push(`id: ${event.id}`);
  for (const data of event.data) lines.push(`data: ${data}`);
  lines.push('');
  return lines
    .map((line) => {
      let end = ends();
      if (line === '' && end === '\n' && previous.end === '\r') end = '\r\n';
      previous.end = end;
      return line + end;
    })
    .join('');
}

/** What the reader should give for `event`. */
function expected(event: ModelEvent): SseEvent {
  return { id: event.id, event: event.event ?? 'message', data: event.data.join('\n') };
}

/** `text` cut at `cuts` (positions, any order, repeats allowed). */
function cutAt(text: string, cuts: readonly number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const chunks: string[] = [];
  let from = 0;
  for (const cut of at) {
    chunks.push(text.slice(from, cut));
    from = cut;
  }
  chunks.push(text.slice(from));
  return chunks;
}

const stream = fc
  .tuple(fc.array(modelEvent, { maxLength: 6 }), fc.array(lineEnd, { minLength: 1 }))
  .map(([events, endings]) => {
    let i = 0;
    const ends = () => endings[i++ % endings.length]!;
    const previous = { end: '' };
    return { events, text: events.map((event) => serialise(event, ends, previous)).join('') };
  });

describe('the client reading an event stream, in chunks', () => {
  it('reads any cut of a valid stream as the events of the whole (property)', () => {
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 12 }), ({ events, text }, cuts) => {
        const whole = new EventStreamParser().push(text);
        expect(whole).toEqual(events.map(expected));
        const parser = new EventStreamParser();
        const chunked: SseEvent[] = [];
        for (const chunk of cutAt(text, cuts)) parser.push(chunk, chunked);
        expect(chunked).toEqual(whole);
        // The stateless form, fed what it returns plus the next chunk, agrees.
        const stateless: SseEvent[] = [];
        let rest = '';
        for (const chunk of cutAt(text, cuts)) rest = parseEvents(rest + chunk, stateless);
        expect(stateless).toEqual(whole);
      }),
      { numRuns: 500 },
    );
  });
});

/**
 * Characters that string searches and copies go over while `run` runs: String.prototype's
 * searching and copying methods, patched to count and then restored. Counted as the work they
 * do (a search from its start to what it found, a copy its length).
 */
async function charactersTouched(run: () => Promise<void>): Promise<number> {
  let touched = 0;
  const proto = String.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const cost: Record<string, (text: string, args: unknown[], result: unknown) => number> = {
    indexOf: (text, [needle, from], result) => {
      const start = Math.max(0, Number(from ?? 0) || 0);
      const found = result as number;
      return found < 0 ? text.length - start : found - start + String(needle).length;
    },
    lastIndexOf: (text) => text.length,
    includes: (text) => text.length,
    replace: (text) => text.length,
    replaceAll: (text) => text.length,
    split: (text) => text.length,
    match: (text) => text.length,
    matchAll: (text) => text.length,
    search: (text) => text.length,
    slice: (_text, _args, result) => (result as string).length,
    substring: (_text, _args, result) => (result as string).length,
    concat: (_text, _args, result) => (result as string).length,
  };
  const originals = new Map(Object.keys(cost).map((name) => [name, proto[name]!]));
  for (const [name, original] of originals) {
    const count = cost[name]!;
    proto[name] = function (this: string, ...args: unknown[]) {
      const result = Reflect.apply(original, this, args);
      touched += count(this, args, result);
      return result;
    };
  }
  try {
    await run();
  } finally {
    for (const [name, original] of originals) proto[name] = original;
  }
  return touched;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('SseSocket reading a large event in many chunks', () => {
  it('goes over each character a bounded number of times, not once per chunk', async () => {
    const size = 256 * 1024;
    const big = JSON.stringify({ jsonrpc: '2.0', method: 'big', params: ['y'.repeat(size)] });
    const hello = JSON.stringify({ session: 's', secret: 't', lastEventId: 0 });
    const text = `event: session\ndata: ${hello}\n\nid: 1\ndata: ${big}\n\n`;
    const bytes = new TextEncoder().encode(text);
    const chunkBytes = 256;
    // The stream as the network might cut it: chunk boundaries cannot be chosen on a real
    // socket, so the body is served from memory, 256 bytes per read.
    let offset = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (offset < bytes.length) {
            controller.enqueue(bytes.slice(offset, offset + chunkBytes));
            offset += chunkBytes;
          }
          // Then stays open: no resume.
        },
      },
      { highWaterMark: 0 },
    );
    let streams = 0;
    const served = (() =>
      Promise.resolve(
        streams++ === 0
          ? new Response(body, { headers: { 'content-type': 'text/event-stream' } })
          : new Response(null, { status: 204 }),
      )) as unknown as typeof fetch;
    const Socket = sseSocket({
      fetch: served,
      eventsUrl: () => 'http://127.0.0.1:9/rpc/events',
    }) as new (url: string) => WebSocketLike;

    let received = '';
    const touched = await charactersTouched(async () => {
      await new Promise<void>((resolve) => {
        const socket = new Socket('ws://127.0.0.1:9/rpc');
        cleanups.push(() => socket.close());
        socket.onmessage = (event) => {
          received = String(event.data);
          resolve();
        };
      });
    });
    expect(received).toBe(big);
    // Read in text.length / 256 chunks; rescanning what is held on every chunk would go over
    // about text.length² / 512 characters (over a hundred million here).
    expect(touched).toBeLessThan(10 * text.length);
  });
});

describe('maxEventChars', () => {
  it('the parser gives up on an event past the bound, in whatever chunks it comes, and never on a stream of smaller ones (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 20, max: 200 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 30 }),
        (max, cuts) => {
          // Small events and comments, each under the bound, many times over it in all.
          const small = `: beat\n\nid: 1\ndata: ${'s'.repeat(max - 20)}\n\n`;
          const text = small.repeat(20);
          const parser = new EventStreamParser(max);
          let at = 0;
          for (const size of [...cuts, text.length]) {
            expect(parser.push(text.slice(at, at + size))).toBeDefined();
            at += size;
            if (at >= text.length) break;
          }
          // One event over the bound: given up once the characters held pass it.
          const over = new EventStreamParser(max);
          const big = `data: ${'b'.repeat(max)}`;
          let results: (SseEvent[] | undefined)[] = [];
          for (let from = 0; from < big.length; from += cuts[0]!) {
            results = [...results, over.push(big.slice(from, from + cuts[0]!))];
          }
          expect(results.at(-1)).toBeUndefined();
        },
      ),
      { numRuns: 200 },
    );
  });

  it('SseSocket closes 1009 on an event without end past maxEventChars', async () => {
    const hello = JSON.stringify({ session: 's', secret: 't', lastEventId: 0 });
    const head = new TextEncoder().encode(`event: session\ndata: ${hello}\n\ndata: `);
    const filler = new TextEncoder().encode('z'.repeat(16 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          // The session event, then one event's data that never ends.
          controller.enqueue(sent++ === 0 ? head : filler);
        },
      },
      { highWaterMark: 0 },
    );
    const served = (() =>
      Promise.resolve(
        new Response(body, { headers: { 'content-type': 'text/event-stream' } }),
      )) as unknown as typeof fetch;
    const Socket = sseSocket({
      fetch: served,
      eventsUrl: () => 'http://127.0.0.1:9/rpc/events',
      maxEventChars: 256 * 1024,
    }) as new (url: string) => WebSocketLike;
    const socket = new Socket('ws://127.0.0.1:9/rpc');
    cleanups.push(() => socket.close());
    const closed = await new Promise<{ code: number; reason: string }>((resolve) => {
      socket.onclose = resolve;
    });
    expect(closed).toEqual({ code: 1009, reason: 'an event over 262144 characters' });
    // It stopped reading soon after the bound: not the whole endless body.
    expect(sent * 16 * 1024).toBeLessThan(2 * 256 * 1024);
  });
});
