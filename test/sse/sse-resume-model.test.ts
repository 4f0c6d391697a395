/**
 * The client's resume loop, as a model: a stream that drops is resumed, and each resume is
 * answered (by a real proxy in front of a real gateway) 200, 429 or 503 with Retry-After (waited
 * out), 429 with a Retry-After past the client's cap, 503 without Retry-After, 404, or a network
 * error. For any sequence of those answers: every resume names the last event id the client
 * read, the client never has more than one resume out at a time, and it ends closed (1006)
 * exactly when an answer is fatal (404, a 503 without Retry-After, a wait past the cap) or five
 * resumes in a row since the last stream reach no server; otherwise it reads every event once,
 * in order, those sent while the stream was away included.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SseSocket } from '../../src/client/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { ResumeProxy } from './resume-proxy.js';
import type { ResumeAnswer } from './resume-proxy.js';

/** Network errors in a row, since the last stream read, that close the socket. */
const RESUME_ATTEMPTS = 5;

const answer = fc.constantFrom<ResumeAnswer>(
  '200',
  '200',
  '429',
  '429',
  '429 past the cap',
  '503',
  '503 dated',
  '503 bare',
  '404',
  'network error',
  'network error',
);

/** How many of `script`'s answers the client takes, and whether it ends closed. */
function expected(script: readonly ResumeAnswer[]): { taken: number; closed: boolean } {
  let failures = 0;
  for (let i = 0; i < script.length; i++) {
    const next = script[i]!;
    if (next === '200') failures = 0;
    else if (next === 'network error') {
      if (++failures >= RESUME_ATTEMPTS) return { taken: i + 1, closed: true };
    } else if (next === '404' || next === '503 bare' || next === '429 past the cap') {
      return { taken: i + 1, closed: true };
    }
  }
  return { taken: script.length, closed: false };
}

interface StreamTransport {
  lastEventId: number;
}

describe('HTTP streaming fallback (client): the resume loop (model)', () => {
  it('resumes from the last id read, one at a time, and closes only on a fatal answer', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(answer, { minLength: 1, maxLength: 8 }), async (script) => {
        const local: (() => unknown)[] = [];
        try {
          const running = await startGateway({ routes: { events: '/rpc/events' } });
          local.push(() => running.gateway.close({ timeoutMs: 1_000 }));
          const proxy = new ResumeProxy(running.port);
          const port = await proxy.start();
          local.push(() => proxy.close());
          const socket = new SseSocket(`ws://127.0.0.1:${port}/rpc`);
          local.push(() => socket.close());
          const read: number[] = [];
          let closed: { code: number } | undefined;
          socket.onmessage = ({ data }) =>
            read.push((JSON.parse(data as string) as { params: [number] }).params[0]);
          socket.onclose = (event) => (closed = event);
          await waitUntil(() => socket.readyState === 1, 'the socket open');
          const [session] = [...running.gateway.sessions.values()];
          const transport = session!.transport as unknown as StreamTransport;
          let sent = 0;
          const tick = () => session!.notify('tick', [++sent]);

          proxy.script.push(...script);
          const { taken, closed: endsClosed } = expected(script);
          // The streams: the first, one per '200' taken, and, unless the socket ends closed, the
          // one the script has no answer for. Each is dropped but that last one.
          const lastIds: string[] = [];
          const forwarded = script.slice(0, taken).filter((next) => next === '200').length;
          const streams = 1 + forwarded + (endsClosed ? 0 : 1);
          for (let up = 0; up < streams && !closed; up++) {
            tick();
            await waitUntil(() => read.length === sent, 'every event read');
            if (up === streams - 1 && !endsClosed) break;
            const lastId = String(transport.lastEventId);
            const before = proxy.resumes.length;
            proxy.dropStream();
            tick(); // sent while the stream is away
            await waitUntil(
              () => closed !== undefined || read.length === sent,
              'the stream back, or the socket closed',
            );
            // Every resume since the drop named the last event read before it.
            for (let i = before; i < proxy.resumes.length; i++) lastIds.push(lastId);
          }
          if (endsClosed) await waitUntil(() => closed !== undefined, 'the socket closed');

          expect(proxy.resumes.map((resume) => resume.lastEventId)).toEqual(lastIds);
          expect(proxy.mostAnsweringAtOnce).toBeLessThanOrEqual(1);
          expect(proxy.resumes.map((resume) => resume.answer)).toEqual([
            ...script.slice(0, taken),
            ...(endsClosed ? [] : ['200']),
          ]);
          expect(closed?.code).toBe(endsClosed ? 1006 : undefined);
          if (!endsClosed) {
            expect(read).toEqual(Array.from({ length: sent }, (_, i) => i + 1));
          }
        } finally {
          for (const cleanup of local.splice(0).reverse()) await cleanup();
        }
      }),
      { numRuns: 20 },
    );
  }, 180_000);
});
