/*
 * SseSocket's promise on resuming a dropped event stream: resumes are paced. A resume after a
 * stream cut short (up less than RESUME_STABLE_MS) waits RESUME_DELAY_MS, doubled for each
 * further short stream in a row that delivered no application message (the session event every
 * stream starts with does not count), up to MAX_RESUME_DELAY_MS; only a stream that stayed up
 * RESUME_STABLE_MS resumes at once. A server or proxy that cuts every stream after its first
 * event is asked again at most once per MAX_RESUME_DELAY_MS, not in a loop with no delay.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  MAX_RESUME_DELAY_MS,
  MIN_REFUSAL_WAIT_MS,
  RESUME_DELAY_MS,
  RESUME_STABLE_MS,
  SseSocket,
  resumeDelay,
  shortStreams,
} from '../../src/client/sse-transport.js';
import { listenOnLoopback } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';

const serverCloses: (() => Promise<void>)[] = [];
const sockets: SseSocket[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const socket of sockets.splice(0)) socket.close();
  for (const close of serverCloses.splice(0)) await close();
});

/** Each wait the socket asks for, recorded and ended at once (no clock involved). */
function spyOnWaits(): number[] {
  const waits: number[] = [];
  const proto = SseSocket.prototype as unknown as { sleep(ms: number): Promise<void> };
  vi.spyOn(proto, 'sleep').mockImplementation((ms) => {
    waits.push(ms);
    return Promise.resolve();
  });
  return waits;
}

/** A server whose every stream is the session event, then `more` (events), then a cut. */
async function cuttingServer(
  more: (n: number) => string,
): Promise<{ url: string; streams: () => number }> {
  let streams = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'GET') return void res.writeHead(202).end();
    streams++;
    // The session event, as the gateway starts every stream (a resumed one too: going on after
    // the Last-Event-ID it names), then a cut.
    const last = Number(req.headers['last-event-id'] ?? 0);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(
      `event: session\ndata: {"session":"n-1","secret":"s","lastEventId":${last}}\n\n${more(streams)}`,
      () => res.destroy(),
    );
  });
  const { port, close } = await listenOnLoopback(server);
  serverCloses.push(close);
  return { url: `ws://127.0.0.1:${port}/rpc`, streams: () => streams };
}

describe('SseSocket against a server that cuts every stream after one event', () => {
  it('resumes after growing waits, up to MAX_RESUME_DELAY_MS, never at once', async () => {
    const waits = spyOnWaits();
    const server = await cuttingServer(() => '');
    const socket = new SseSocket(server.url);
    sockets.push(socket);
    await waitUntil(
      () => server.streams() >= 30 || socket.readyState === 3,
      '30 streams, or a close',
    );
    expect(socket.readyState).toBe(1);
    expect(waits.slice(0, 8)).toEqual([250, 500, 1_000, 2_000, 4_000, 5_000, 5_000, 5_000]);
    expect(Math.min(...waits)).toBe(RESUME_DELAY_MS);
    expect(waits.slice(2).every((w) => w >= MIN_REFUSAL_WAIT_MS)).toBe(true);
  });

  it('a short stream that delivered messages resumes after RESUME_DELAY_MS, not at once', async () => {
    const waits = spyOnWaits();
    const server = await cuttingServer((n) => `id: ${n}\ndata: {"jsonrpc":"2.0","method":"m"}\n\n`);
    const socket = new SseSocket(server.url);
    sockets.push(socket);
    const got: unknown[] = [];
    socket.onmessage = (event) => got.push(event.data);
    await waitUntil(
      () => server.streams() >= 10 || socket.readyState === 3,
      '10 streams, or a close',
    );
    expect(socket.readyState).toBe(1);
    expect(got.length).toBeGreaterThanOrEqual(9);
    expect(waits.length).toBeGreaterThanOrEqual(9);
    expect(new Set(waits)).toEqual(new Set([RESUME_DELAY_MS]));
  });
});

describe('resume pacing (shortStreams, resumeDelay)', () => {
  type Outcome = { upMs: number; messages: boolean };
  // Made in each test: the constants are read when a test runs, not when the file loads.
  const outcome = (): fc.Arbitrary<Outcome> =>
    fc.record({
      upMs: fc.oneof(
        fc.integer({ min: 0, max: RESUME_STABLE_MS - 1 }),
        fc.integer({ min: 0, max: 60_000 }),
      ),
      messages: fc.boolean(),
    });

  /** Each stream's start time, over `outcomes` in order, each resume waiting as paced. */
  function starts(outcomes: Outcome[]): number[] {
    let short = 0;
    let now = 0;
    const at: number[] = [];
    for (const { upMs, messages } of outcomes) {
      at.push(now);
      short = shortStreams(short, upMs, messages);
      now += upMs + resumeDelay(short);
    }
    return at;
  }

  it('after 3 short streams in a row without messages, every wait is at least MIN_REFUSAL_WAIT_MS', () => {
    fc.assert(
      fc.property(fc.array(outcome()), fc.integer({ min: 3, max: 40 }), (before, n) => {
        let short = 0;
        for (const { upMs, messages } of before) short = shortStreams(short, upMs, messages);
        for (let i = 0; i < n; i++) {
          short = shortStreams(short, RESUME_STABLE_MS - 1, false);
          if (i >= 2) expect(resumeDelay(short)).toBeGreaterThanOrEqual(MIN_REFUSAL_WAIT_MS);
          expect(resumeDelay(short)).toBeLessThanOrEqual(MAX_RESUME_DELAY_MS);
        }
      }),
    );
  });

  it('in any 60 s, at most 60 000 / RESUME_DELAY_MS + 1 requests; cut at once with no messages, at most 5 + 60 000 / MAX_RESUME_DELAY_MS', () => {
    const window = 60_000;
    const inWindow = (at: number[], from: number): number =>
      at.filter((t) => t >= from && t < from + window).length;
    fc.assert(
      fc.property(fc.array(outcome(), { maxLength: 400 }), (outcomes) => {
        const at = starts(outcomes);
        for (const from of at)
          expect(inWindow(at, from)).toBeLessThanOrEqual(window / RESUME_DELAY_MS + 1);
      }),
    );
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 400 }), (ups) => {
        const at = starts(ups.map((upMs) => ({ upMs, messages: false })));
        for (const from of at)
          expect(inWindow(at, from)).toBeLessThanOrEqual(5 + window / MAX_RESUME_DELAY_MS);
      }),
    );
  });
});
