/*
 * Model-based property test of PendingCalls' timeouts (src/peer/pending-calls.ts) under fake
 * timers and a fake clock: random runs of calls opened with random timeouts (none, 0, Infinity,
 * the table's default, a few ms, beyond 2^31-1 ms), some with an abort signal, answered,
 * refused, aborted, and time moved on, checked against a model. After every step each call's
 * outcome is the model's (a call times out exactly when its own deadline has passed, never
 * before, and settles once), the calls given up are told to the other side once each, in
 * deadline order, and the table holds one timer while a timed call is pending, at most one
 * otherwise (left armed by the last timed call settling), and none once closed.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_MS, PendingCalls } from '../../src/peer/pending-calls.js';
import type { CallOptions } from '../../src/peer/pending-calls.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import {
  CancelledError,
  ConnectionClosedError,
  TimeoutError,
} from '../../src/protocol/local-errors.js';
import { openCall } from '../support/peers.js';

const DEFAULT_TIMEOUT = 40;

/** A timeout as a call gives it: undefined takes the table's default. */
const timeoutArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 120 }) },
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom(0, Infinity, 2 ** 31, 2 ** 40) },
);

type Op =
  | { kind: 'open'; timeout: number | undefined; deprecatedName: boolean; signal: boolean }
  | { kind: 'answer'; pick: number }
  | { kind: 'refuse'; pick: number }
  | { kind: 'abort'; pick: number }
  | { kind: 'advance'; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('open' as const),
      timeout: timeoutArb,
      deprecatedName: fc.boolean(),
      signal: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('answer' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('refuse' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), pick: fc.nat() }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('advance' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.constant(1)),
    }),
  },
);

type Outcome = 'answered' | 'refused' | 'timeout' | 'cancelled' | 'closed';

interface ModelCall {
  id: number;
  method: string;
  openedAt: number;
  /** The timeout as the TimeoutError reports it (before clamping). */
  timeout: number;
  /** When it times out; Infinity when never. */
  deadline: number;
  controller: AbortController | undefined;
  /** The model's outcome; undefined while pending. */
  expected: Outcome | undefined;
  /** What the promise did, recorded by its callbacks. */
  seen: { outcome: Outcome; value: unknown }[];
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function outcomeOf(err: unknown): Outcome {
  if (err instanceof TimeoutError) return 'timeout';
  if (err instanceof CancelledError) return 'cancelled';
  if (err instanceof ConnectionClosedError) return 'closed';
  if (err instanceof JsonRpcError) return 'refused';
  throw new Error(`unexpected rejection ${String(err)}`);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('PendingCalls timeouts (model)', () => {
  it('times out each call exactly at its own deadline, settles it once, and holds at most one timer', async () => {
    await fc.assert(
      // Full-length runs: at fast-check's default size a run is ~6 steps, too few for several
      // timed calls to be pending when the timer fires and is armed again.
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }),
        async (ops) => {
          vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
          try {
            const start = performance.now();
            const clock = () => performance.now() - start;
            /** Every id told to the other side as given up, with when. */
            const cancels: { id: number; at: number }[] = [];
            const table = new PendingCalls(1_000, DEFAULT_TIMEOUT, (id) =>
              cancels.push({ id, at: clock() }),
            );
            const calls: ModelCall[] = [];
            const expectedCancels: number[] = [];
            const pending = () => calls.filter((c) => c.expected === undefined);

            const check = async () => {
              await flush();
              for (const call of calls) {
                if (call.expected === undefined) {
                  expect(call.seen).toEqual([]);
                } else {
                  expect(call.seen).toHaveLength(1);
                  expect(call.seen[0]!.outcome).toBe(call.expected);
                  if (call.expected === 'timeout') {
                    expect(call.seen[0]!.value).toMatchObject({
                      method: call.method,
                      timeoutMs: call.timeout,
                    });
                  }
                }
              }
              expect(cancels.map((c) => c.id)).toEqual(expectedCancels);
              expect(table.size).toBe(pending().length);
              const timed = pending().some((c) => c.deadline !== Infinity);
              if (timed) expect(vi.getTimerCount()).toBe(1);
              else expect(vi.getTimerCount()).toBeLessThanOrEqual(1);
            };

            for (const op of ops) {
              switch (op.kind) {
                case 'open': {
                  const controller = op.signal ? new AbortController() : undefined;
                  const options: CallOptions = {};
                  if (op.deprecatedName) options.timeout = op.timeout;
                  else options.timeoutMs = op.timeout;
                  if (controller) options.signal = controller.signal;
                  const method = `m${calls.length}`;
                  const { id, promise } = openCall(table, method, options);
                  const timeout = op.timeout ?? DEFAULT_TIMEOUT;
                  const timed = timeout > 0 && Number.isFinite(timeout);
                  const call: ModelCall = {
                    id,
                    method,
                    openedAt: clock(),
                    timeout,
                    deadline: timed ? clock() + Math.min(timeout, MAX_TIMER_MS) : Infinity,
                    controller,
                    expected: undefined,
                    seen: [],
                  };
                  promise.then(
                    (value) => call.seen.push({ outcome: 'answered', value }),
                    (err: unknown) => call.seen.push({ outcome: outcomeOf(err), value: err }),
                  );
                  calls.push(call);
                  break;
                }
                case 'answer':
                case 'refuse': {
                  const live = pending();
                  // Sometimes a call already settled: its late answer matches nothing.
                  const call = calls[op.pick % (calls.length || 1)];
                  const target =
                    live.length > 0 && op.pick % 3 !== 0 ? live[op.pick % live.length] : call;
                  if (!target) break;
                  const waiting = target.expected === undefined;
                  const matched =
                    op.kind === 'answer'
                      ? table.resolve(target.id, op.pick)
                      : table.reject(target.id, { code: -32000, message: 'no' });
                  expect(matched).toBe(waiting);
                  if (waiting) target.expected = op.kind === 'answer' ? 'answered' : 'refused';
                  break;
                }
                case 'abort': {
                  const withSignal = calls.filter(
                    (c) => c.controller && !c.controller.signal.aborted,
                  );
                  const call = withSignal[op.pick % (withSignal.length || 1)];
                  if (!call) break;
                  call.controller!.abort('why');
                  if (call.expected === undefined) {
                    call.expected = 'cancelled';
                    expectedCancels.push(call.id);
                  }
                  break;
                }
                case 'advance': {
                  const to = clock() + op.ms;
                  // Every pending call whose deadline has come, in deadline order (ties: open order).
                  const due = pending()
                    .filter((c) => c.deadline <= to)
                    .sort((x, y) => x.deadline - y.deadline);
                  vi.advanceTimersByTime(op.ms);
                  for (const call of due) {
                    call.expected = 'timeout';
                    expectedCancels.push(call.id);
                  }
                  break;
                }
              }
              await check();
            }

            // A call times out no earlier than its own timeout, and not later either.
            for (const { id, at } of cancels) {
              const call = calls.find((c) => c.id === id)!;
              if (call.expected === 'timeout') expect(at).toBe(call.deadline);
            }
            for (const call of calls) {
              expect(table.wasAbandoned(call.id)).toBe(
                call.expected === 'timeout' || call.expected === 'cancelled',
              );
            }

            // Close: every call still pending rejects, and no timer is left.
            table.rejectAll(new ConnectionClosedError('gone', 1006));
            for (const call of pending()) call.expected = 'closed';
            await check();
            expect(vi.getTimerCount()).toBe(0);
          } finally {
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
