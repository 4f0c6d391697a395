import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpGet } from '../support/network.js';
import { openRawSocket } from '../support/gateway.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { waitFor } from '../support/waiting.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const MAX_CONCURRENT = 3;
/**
 * A `hang` call's timeout. The other calls answer within 120 ms of reaching the upstream; the
 * margin is wide because the suite shares two cores with others (at 250 ms, an `ok` or `slow`
 * call on a loaded machine was seen answered -32012).
 */
const TIMEOUT_MS = 1_000;

type Behaviour = 'ok' | 'error' | 'slow' | 'garbage' | 'hang';

interface Step {
  behaviour: Behaviour;
  cancel: boolean;
}

const requestOf: Record<Behaviour, { method: string; params?: unknown }> = {
  ok: { method: 'orders.get', params: { n: 1 } },
  error: { method: 'orders.fail', params: { code: 409, message: 'conflict', data: { n: 1 } } },
  slow: { method: 'orders.slow', params: { ms: 120 } },
  garbage: { method: 'orders.garbage' },
  hang: { method: 'orders.hang' },
};

/** What the model allows as a call's answer: its behaviour's own answer, or busy, or cancelled. */
function allowed(step: Step): Set<string> {
  const own: Record<Behaviour, string> = {
    ok: 'result',
    error: '409',
    slow: 'result',
    garbage: '-32011',
    hang: '-32012',
  };
  const answers = new Set([own[step.behaviour], '-32013']);
  if (step.cancel) answers.add('-32001');
  return answers;
}

let python: PythonUpstream;
let running: RoutedGateway;

beforeAll(async () => {
  python = await startPythonUpstream();
  running = await startRoutedGateway({
    upstreams: {
      // One session takes the whole bound here: its share is the upstream's.
      orders: {
        url: python.url,
        maxConcurrent: MAX_CONCURRENT,
        maxConcurrentPerSession: MAX_CONCURRENT,
        timeoutMs: TIMEOUT_MS,
      },
    },
    methods: { 'orders.*': 'orders' },
  });
});

afterAll(async () => {
  await running?.close();
  await python?.stop();
});

describe('routed calls against a model', () => {
  it('every call gets an answer its behaviour allows, and in-flight stays within maxConcurrent', async () => {
    const steps = fc.array(
      fc.record({
        behaviour: fc.oneof(
          { arbitrary: fc.constant<Behaviour>('slow'), weight: 4 },
          fc.constantFrom<Behaviour>('ok', 'error', 'garbage', 'hang'),
        ),
        cancel: fc.nat(3).map((n) => n === 0),
      }),
      { minLength: 1, maxLength: 8 },
    );
    await fc.assert(
      fc.asyncProperty(steps, async (sequence) => {
        // The previous run's aborted requests leave Python once it sees their sockets closed.
        await waitFor(
          async () => ((await python.rpc('test.stats')) as { inFlight: number }).inFlight === 0,
          'the upstream to be idle',
        );
        await python.rpc('test.reset');
        const raw = await openRawSocket(`${running.url}?user=model`);
        try {
          sequence.forEach((step, i) => {
            raw.socket.send(
              JSON.stringify({ jsonrpc: '2.0', id: i + 1, ...requestOf[step.behaviour] }),
            );
          });
          sequence.forEach((step, i) => {
            if (step.cancel) {
              raw.socket.send(
                JSON.stringify({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: i + 1 } }),
              );
            }
          });
          const frames = await raw.waitFor(sequence.length);
          const answers = new Map<number, string>();
          for (const frame of frames) {
            const reply = JSON.parse(frame) as {
              id: number;
              result?: unknown;
              error?: { code: number };
            };
            answers.set(reply.id, reply.error ? String(reply.error.code) : 'result');
          }
          sequence.forEach((step, i) => {
            expect(allowed(step)).toContain(answers.get(i + 1));
          });
          // Calls holding their slot for 120 ms or more fill the bound: every call sent after them
          // (within a few ms) is refused at once.
          const first = sequence.slice(0, MAX_CONCURRENT);
          if (
            first.length === MAX_CONCURRENT &&
            first.every((s) => !s.cancel && (s.behaviour === 'slow' || s.behaviour === 'hang'))
          ) {
            for (let i = MAX_CONCURRENT; i < sequence.length; i++) {
              // A cancel read in the same turn as its call can overtake the refusal.
              const refusals = sequence[i]!.cancel ? ['-32013', '-32001'] : ['-32013'];
              expect(refusals).toContain(answers.get(i + 1));
            }
          }
          // Busy only when the bound was really reached: fewer calls than it never see -32013.
          if (sequence.length <= MAX_CONCURRENT) {
            expect([...answers.values()]).not.toContain('-32013');
          }
          // The gateway frees a slot when it aborts a request (cancel, timeout); Python counts that
          // request until it sees the closed socket (it polls every 10-20 ms), so only aborted
          // requests may add to its count.
          const aborted = sequence.filter((s) => s.cancel || s.behaviour === 'hang').length;
          const stats = (await python.rpc('test.stats')) as { maxInFlight: number };
          expect(stats.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT + aborted);
        } finally {
          raw.close();
        }
      }),
      {
        numRuns: 20,
        examples: [
          [
            [
              { behaviour: 'slow', cancel: false },
              { behaviour: 'hang', cancel: false },
              { behaviour: 'slow', cancel: false },
              { behaviour: 'ok', cancel: false },
              { behaviour: 'error', cancel: true },
            ],
          ],
        ],
      },
    );
    const { body } = await httpGet(`${running.httpUrl}/metrics`);
    expect(body).toMatch(/wsrpc_upstream_in_flight\{upstream="orders"\} 0/);
  }, 60_000);
});
