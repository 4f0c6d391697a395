/**
 * An event-stream session outlives each of its streams. What waits for a stream to drain (a
 * generator pulled at its subscriber's pace, a topic's replay of its history) goes on once
 * that stream is replaced by a resume or drops: a stream destroyed never drains, and the wait
 * would hold the subscription for ever, the session open and streaming, with no gap, error or
 * close. Here the first stream is never read, so the server's socket fills and the wait is for
 * its drain; then the client resumes on a stream it reads, from the start, and gets every value
 * or message once, in order (a generator's value the slow-consumer policy skipped while nothing
 * was read is counted in the next one's `missed`), and the generator's end.
 */
import { afterEach, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { SseTransport } from '../../src/transport/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { sleep } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';
import { openStream, post, resumeHeaders } from './sse-raw.js';
import type { RawStream } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const COUNT = 300;
const PAD = 'x'.repeat(64 * 1024);

/** A gateway whose replay buffer and output bound hold everything the test makes. */
async function roomyGateway() {
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { sseReplayBytes: 64 * 1024 * 1024, maxBufferedBytes: 64 * 1024 * 1024 },
  });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  return { gateway: running.gateway, events: `http://127.0.0.1:${running.port}/rpc/events` };
}

/**
 * A stream that is never read, its session, and `request` posted on it; resolves once the
 * server's socket owes a drain and `progress()` has stopped moving (the wait is on its drain).
 */
async function stalled(
  gateway: Gateway,
  events: string,
  request: object,
  progress: () => number,
): Promise<{ session: { session: string; secret: string } }> {
  const first = await openStream(events, { noRead: true });
  cleanups.push(() => first.destroy());
  await waitFor(() => gateway.sessions.size === 1, 'the session');
  const transport = [...gateway.sessions.values()][0]!.transport as SseTransport;
  const session = { session: transport.sessionId, secret: transport.secret };
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, ...request });
  expect((await post(events, session, body)).status).toBeLessThan(300);
  const stream = (transport as unknown as { stream: { writableNeedDrain: boolean } }).stream;
  let last = -1;
  await waitFor(async () => {
    const now = progress();
    const still = now === last && stream.writableNeedDrain;
    last = now;
    await sleep(100);
    return still && now > 0;
  }, 'waiting for the unread stream to drain');
  expect(progress()).toBeLessThan(COUNT);
  return { session };
}

function resume(events: string, session: { session: string; secret: string }): Promise<RawStream> {
  return openStream(events, { headers: resumeHeaders(session, 0) }).then((stream) => {
    cleanups.push(() => stream.destroy());
    return stream;
  });
}

it('a generator waiting for a stream to drain goes on after a resume replaces the stream', async () => {
  const { gateway, events } = await roomyGateway();
  let yielded = 0;
  gateway.stream(
    'burst',
    async function* () {
      for (let i = 0; i < COUNT; i++) {
        await Promise.resolve();
        yielded++;
        yield { i, pad: PAD };
      }
    },
    { highWaterMark: 16 * 1024 },
  );
  const { session } = await stalled(
    gateway,
    events,
    { method: 'subscribe', params: ['burst'] },
    () => yielded,
  );
  const resumed = await resume(events, session);
  // Each value once, in order, or counted in the `missed` of the next (the slow-consumer
  // policy's word for what it skipped while the client read nothing), and then the end.
  const frames = () =>
    resumed
      .messages()
      .map(
        (m) =>
          (m as { params?: { result?: { i?: number }; missed?: number; complete?: true } }).params,
      )
      .filter((p) => p !== undefined);
  await resumed.until(() => frames().some((p) => p.complete), 15_000);
  const values = frames().flatMap((p) => (p.result?.i === undefined ? [] : [p.result.i]));
  const missed = frames().reduce((n, p) => n + (p.missed ?? 0), 0);
  expect(values).toEqual([...values].sort((x, y) => x - y));
  expect(new Set(values).size).toBe(values.length);
  expect(values.length + missed).toBe(COUNT);
  expect(values.at(-1)).toBe(COUNT - 1);
});

it('a topic replay waiting for a stream to drain goes on after a resume replaces the stream', async () => {
  const { gateway, events } = await roomyGateway();
  gateway.topic('feed', { history: { maxLength: 1_000 } });
  for (let i = 1; i <= COUNT; i++) await gateway.publish('feed', { i, pad: PAD });
  const lastEventId = () =>
    ([...gateway.sessions.values()][0]?.transport as SseTransport | undefined)?.lastEventId ?? 0;
  const { session } = await stalled(
    gateway,
    events,
    { method: 'subscribe', params: ['feed', null, { since: 0 }] },
    lastEventId,
  );
  const resumed = await resume(events, session);
  const seqs = () =>
    resumed
      .messages()
      .map((m) => (m as { params?: { seq?: number } }).params?.seq)
      .filter((seq) => typeof seq === 'number');
  await resumed.until(() => seqs().includes(COUNT), 15_000);
  // And the live messages after the replay.
  await gateway.publish('feed', { i: COUNT + 1 });
  await resumed.until(() => seqs().includes(COUNT + 1), 15_000);
  expect(seqs()).toEqual(Array.from({ length: COUNT + 1 }, (_, i) => i + 1));
});
