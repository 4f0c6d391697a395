/*
 * Model-based property test of FirstPageReads (src/server/first-page-reads.ts), the reads of
 * `$presence` first pages: random waiters come to topics and leave, and the reads end (answered
 * or failed) in any order.
 *
 * What must hold: at most one read of a topic at a time and at most `maxReads` on the node; each
 * waiter still there when its read ends gets that read's outcome once, and it is a read that
 * started after the waiter came (what changed before would be missed); a waiter gets nothing
 * after it left; once every read has ended, nobody who stayed is left waiting.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FirstPageReads } from '../../src/server/first-page-reads.js';

const TOPICS = ['a', 'b', 'c'] as const;

interface Read {
  topic: string;
  /** When it started, in steps. */
  startedAt: number;
  answer: (page: number) => void;
  fail: (err: Error) => void;
}

interface Waiter {
  topic: string;
  cameAt: number;
  leave: () => void;
  left: boolean;
  leftAt?: number;
  outcomes: { page?: number; failed?: boolean; at: number }[];
}

const op = fc.oneof(
  {
    arbitrary: fc.record({ t: fc.constant('want' as const), topic: fc.constantFrom(...TOPICS) }),
    weight: 3,
  },
  { arbitrary: fc.record({ t: fc.constant('leave' as const), index: fc.nat(30) }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('answer' as const), index: fc.nat(10) }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('fail' as const), index: fc.nat(10) }), weight: 1 },
);

async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await Promise.resolve();
}

describe('FirstPageReads (model)', () => {
  it('one read per topic, at most maxReads, each waiter answered once by a read that began after it came', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.array(op, { maxLength: 80, size: 'max' }),
        async (maxReads, ops) => {
          let step = 0;
          let pageOf = 0;
          const running: Read[] = [];
          const startedPages = new Map<number, number>();
          const reads = new FirstPageReads<number>(maxReads, (topic) => {
            expect(running.filter((r) => r.topic === topic)).toHaveLength(0);
            return new Promise<number>((resolve, reject) => {
              const page = ++pageOf;
              startedPages.set(page, step);
              running.push({ topic, startedAt: step, answer: () => resolve(page), fail: reject });
            });
          });
          const waiters: Waiter[] = [];
          const check = () => {
            expect(running.length).toBeLessThanOrEqual(maxReads);
            expect(reads.inFlight).toBe(running.length);
            expect(new Set(running.map((r) => r.topic)).size).toBe(running.length);
          };
          for (const o of ops) {
            step++;
            if (o.t === 'want') {
              const waiter: Waiter = {
                topic: o.topic,
                cameAt: step,
                left: false,
                outcomes: [],
                leave: () => undefined,
              };
              waiter.leave = reads.want(o.topic, {
                done: (page) => waiter.outcomes.push({ page, at: step }),
                fail: () => waiter.outcomes.push({ failed: true, at: step }),
              });
              waiters.push(waiter);
            } else if (o.t === 'leave') {
              const here = waiters.filter((w) => !w.left);
              const waiter = here[o.index % Math.max(1, here.length)];
              if (waiter) {
                waiter.left = true;
                waiter.leftAt = step;
                waiter.leave();
              }
            } else if (running.length > 0) {
              const read = running.splice(o.index % running.length, 1)[0]!;
              if (o.t === 'answer') read.answer(0);
              else read.fail(new Error('broker'));
            }
            await settle();
            check();
          }
          // Every read ends, answered, until none is left.
          for (let i = 0; i < 100 && running.length > 0; i++) {
            running.shift()!.answer(0);
            await settle();
            check();
          }
          expect(running).toHaveLength(0);
          for (const waiter of waiters) {
            expect(waiter.outcomes.length).toBeLessThanOrEqual(1);
            const [outcome] = waiter.outcomes;
            if (!waiter.left) expect(outcome).toBeDefined();
            // Nothing after it left.
            else if (outcome) expect(outcome.at).toBeLessThan(waiter.leftAt!);
            if (outcome?.page !== undefined) {
              // A page read after the waiter came (the read started at a later step).
              expect(startedPages.get(outcome.page)!).toBeGreaterThanOrEqual(waiter.cameAt);
            }
          }
          expect(reads.inFlight).toBe(0);
        },
      ),
      { numRuns: Number(process.env['MODEL_RUNS'] ?? 300) },
    );
  });
});
