/**
 * A generator stream (an `async function*`) is pulled at its subscriber's pace on the event
 * stream too, also while the client's stream has dropped and not yet resumed: what it yields
 * meanwhile waits in the session's replay buffer, which counts toward the stream's
 * highWaterMark, and past it the generator waits for the resume. Unpaced, a generator that
 * awaits nothing real would run on in microtasks (without end, holding the event loop), and what
 * it made past the replay buffer's bound (sseReplayBytes) would be lost, the session closed 1008
 * on its resume. Here it makes ten times that bound.
 */
import { afterEach, expect, it } from 'vitest';
import type { SseTransport } from '../../src/transport/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitFor } from '../support/waiting.js';
import { openStream, post, resumeHeaders } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const REPLAY_BYTES = 32 * 1024;
const VALUES = 800;
const PAD = 'x'.repeat(400);

it('a generator is paused while the stream is away, and goes on after the resume: every value, in order', async () => {
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { sseReplayBytes: REPLAY_BYTES },
  });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const { gateway } = running;
  let yielded = 0;
  gateway.stream(
    'burst',
    async function* () {
      for (let i = 0; i < VALUES; i++) {
        // Awaits nothing real: microtasks only, as a generator over values in memory.
        await Promise.resolve();
        yielded++;
        yield { i, pad: PAD };
      }
    },
    { highWaterMark: 4 * 1024 },
  );
  const events = `http://127.0.0.1:${running.port}/rpc/events`;
  const first = await openStream(events);
  const { session } = first;
  const transport = [...gateway.sessions.values()][0]!.transport as SseTransport;
  first.destroy();
  await waitFor(() => !transport.streaming, 'the stream dropped');
  const subscribe = JSON.stringify({
    jsonrpc: '2.0',
    method: 'subscribe',
    params: ['burst'],
    id: 1,
  });
  expect((await post(`${events}`, session, subscribe)).status).toBeLessThan(300);
  await waitFor(() => yielded > 0, 'the generator started');
  // Without a stream it stops within the mark, far short of its values.
  expect(transport.replayKeptBytes).toBeLessThan(REPLAY_BYTES);
  const resumed = await openStream(events, {
    headers: resumeHeaders(session, session.lastEventId),
  });
  cleanups.push(() => resumed.destroy());
  const frames = await resumed.until(
    (all) => all.some((e) => e.event === 'close' || e.data.includes('"complete":true')),
    20_000,
  );
  expect(frames.filter((e) => e.event === 'close')).toEqual([]);
  const values = resumed
    .messages()
    .map((m) => (m as { params?: { result?: { i?: number } } }).params?.result?.i)
    .filter((i): i is number => typeof i === 'number');
  expect(values).toEqual(Array.from({ length: VALUES }, (_, i) => i));
});
