/**
 * The HTTP streaming fallback's client (SseSocket): a refused resume (429, or 503 with
 * Retry-After) is tried again after the wait the server asks, read as RFC 9110 has it
 * (delay-seconds or an HTTP-date; anything else is no Retry-After), and never sooner than
 * MIN_REFUSAL_WAIT_MS: no answer a server or proxy gives makes the client resume in a loop.
 */
import fc from 'fast-check';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MIN_REFUSAL_WAIT_MS, SseSocket, refusalWait } from '../../src/client/sse-transport.js';
import { listenOnLoopback } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';

const NOW = Date.UTC(2030, 0, 15, 12, 0, 0);

describe('refusalWait', () => {
  it('reads delay-seconds and HTTP-dates; anything else is no Retry-After', () => {
    const cases: [number, string | null, number | undefined][] = [
      [503, '0', MIN_REFUSAL_WAIT_MS],
      [503, '1', MIN_REFUSAL_WAIT_MS],
      [503, '5', 5_000],
      [503, ' 7 ', 7_000],
      [503, '1.5', undefined],
      [503, '-1', undefined],
      [503, '+3', undefined],
      [503, '1e3', undefined],
      [503, '', undefined],
      [503, null, undefined],
      [503, '2001', 2_001_000],
      [503, 'Tue, 15 Jan 2030 12:00:10 GMT', 10_000],
      [503, 'Tuesday, 15-Jan-30 12:00:10 GMT', 10_000],
      [503, 'Tue Jan 15 12:00:10 2030', 10_000],
      [503, 'Tue, 15 Jan 2030 11:00:00 GMT', MIN_REFUSAL_WAIT_MS],
      [503, 'Tue, 15 Jan 2030 12:00:10 +0000', undefined],
      [503, '2030-01-15T12:00:10Z', undefined],
      [503, 'Tue, 45 Jan 2030 12:00:10 GMT', undefined],
      [429, '1.5', MIN_REFUSAL_WAIT_MS],
      [429, null, MIN_REFUSAL_WAIT_MS],
      [429, '0', MIN_REFUSAL_WAIT_MS],
      [429, '3', 3_000],
      [500, '3', undefined],
      [404, null, undefined],
    ];
    for (const [status, header, wait] of cases) {
      expect([status, header, refusalWait(status, header, NOW)]).toEqual([status, header, wait]);
    }
  });

  it('is final or a finite wait of at least MIN_REFUSAL_WAIT_MS, whatever the header', () => {
    const header = fc.oneof(
      fc.string(),
      fc.stringMatching(/^[-+ .0-9eE]{0,12}$/),
      fc.bigInt({ min: 0n, max: 10n ** 400n }).map(String),
      fc.date({ noInvalidDate: true }).map((date) => date.toUTCString()),
      fc.date({ noInvalidDate: true }).map((date) => date.toString()),
      fc.date({ noInvalidDate: true }).map((date) => date.toISOString()),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(429, 503, 500, 200),
        fc.option(header, { nil: null }),
        fc.integer({ min: 0, max: 4_102_444_800_000 }),
        (status, retryAfter, now) => {
          const wait = refusalWait(status, retryAfter, now);
          if (status === 429) expect(wait).toBeDefined();
          if (status !== 429 && status !== 503) expect(wait).toBeUndefined();
          if (wait === undefined) return;
          expect(Number.isFinite(wait)).toBe(true);
          expect(wait).toBeGreaterThanOrEqual(MIN_REFUSAL_WAIT_MS);
        },
      ),
    );
  });
});

/** The waits an SseSocket asks for, each held until the test lets it end. */
interface Wait {
  ms: number;
  end(): void;
}

function holdWaits(): Wait[] {
  const waits: Wait[] = [];
  const proto = SseSocket.prototype as unknown as { sleep(ms: number): Promise<void> };
  vi.spyOn(proto, 'sleep').mockImplementation(
    (ms) => new Promise<void>((end) => waits.push({ ms, end })),
  );
  return waits;
}

/**
 * An events endpoint: the first stream names a session and is cut at once; each resume is
 * answered `status` with `retry-after`.
 */
async function refusingServer(status: number, retryAfter: string) {
  let resumes = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'GET') return void res.writeHead(202).end();
    if (req.headers['x-wsrpc-session'] === undefined) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: session\ndata: {"session":"n-1","secret":"s","lastEventId":0}\n\n', () =>
        res.destroy(),
      );
      return;
    }
    resumes++;
    res.writeHead(status, { 'retry-after': retryAfter }).end();
  });
  const { port, close } = await listenOnLoopback(server);
  serverCloses.push(close);
  return { url: `ws://127.0.0.1:${port}/rpc`, resumes: () => resumes };
}

const serverCloses: (() => Promise<void>)[] = [];
const sockets: SseSocket[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const socket of sockets.splice(0)) socket.close();
  for (const close of serverCloses.splice(0)) await close();
});

function open(url: string) {
  const socket = new SseSocket(url);
  sockets.push(socket);
  const closes: { code: number; reason: string }[] = [];
  socket.onclose = (event) => closes.push(event);
  return { socket, closes };
}

describe('SseSocket: a resume refused with Retry-After', () => {
  it('"0" on a 503: the next resume waits MIN_REFUSAL_WAIT_MS, and comes only once it is over', async () => {
    const waits = holdWaits();
    const server = await refusingServer(503, '0');
    const { socket } = open(server.url);
    await waitUntil(() => waits.length === 1, 'the wait after the first stream dropped');
    waits[0]!.end();
    await waitUntil(() => waits.length === 2, 'the wait after the refused resume');
    expect(server.resumes()).toBe(1);
    expect(waits[1]!.ms).toBe(MIN_REFUSAL_WAIT_MS);
    waits[1]!.end();
    await waitUntil(() => waits.length === 3, 'the wait after the second refused resume');
    expect([server.resumes(), waits[2]!.ms]).toEqual([2, MIN_REFUSAL_WAIT_MS]);
    expect(socket.readyState).toBe(1);
  });

  it.each(['1.5', '-1', 'soon'])(
    '%j on a 503 is no Retry-After: the refusal is final',
    async (value) => {
      const waits = holdWaits();
      const server = await refusingServer(503, value);
      const { closes } = open(server.url);
      await waitUntil(() => waits.length === 1, 'the wait after the first stream dropped');
      waits[0]!.end();
      await waitUntil(() => closes.length > 0 || waits.length > 1, 'the close, or another wait');
      expect(closes).toEqual([{ code: 1006, reason: 'event stream answered 503' }]);
      expect([server.resumes(), waits.length]).toEqual([1, 1]);
    },
  );

  it('"1.5" on a 429 is no Retry-After: the resume is tried again after 1 s', async () => {
    const waits = holdWaits();
    const server = await refusingServer(429, '1.5');
    const { socket } = open(server.url);
    await waitUntil(() => waits.length === 1, 'the wait after the first stream dropped');
    waits[0]!.end();
    await waitUntil(() => waits.length === 2, 'the wait after the refused resume');
    expect([server.resumes(), waits[1]!.ms]).toEqual([1, 1_000]);
    expect(socket.readyState).toBe(1);
  });
});
