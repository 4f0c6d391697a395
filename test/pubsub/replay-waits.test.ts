/*
 * What a connection's resumes wait on: its history read slots (Slots, src/pubsub/slots.ts) and
 * its replays' wait for the socket to drain (DrainWaiters, src/pubsub/drain-waiters.ts). A
 * connection keeps both for life once it has resumed, as the project's client does on every
 * reconnect, so each is checked two ways:
 *  - a model-based property test: random runs of take, release (twice, at times), give up a
 *    waiting turn (and one already granted) against a list and a count; wait, cancel (twice, at
 *    times, and after the drain) and drain against a set. After every step: who holds a slot,
 *    in what order they were granted, how many wait; which listeners were told, and whether the
 *    socket's drain is listened for (only while someone waits);
 *  - what one holds once its reads and waits are over: no more than its own fields, the Set it
 *    queued turns or listeners in let go (it costs more than the object).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DrainWaiters } from '../../src/pubsub/drain-waiters.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { Slots } from '../../src/pubsub/slots.js';
import { bytesPerObject } from '../support/heap.js';
import { WaitersModel } from '../support/waiters-model.js';

type SlotOp =
  { kind: 'take' } | { kind: 'release'; which: number } | { kind: 'giveUp'; which: number };

const slotOpArb: fc.Arbitrary<SlotOp> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'take' as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('release' as const), which: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('giveUp' as const), which: fc.nat() }) },
);

describe('Slots (model)', () => {
  it('grants at most `size` at once, first come first served, and skips turns given up', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.array(slotOpArb, { maxLength: 40 }),
        (size, ops) => {
          const slots = new Slots(size);
          /** Every take: its release once granted, its give-up. */
          const takes: { release?: () => void; giveUp: () => void }[] = [];
          const granted: number[] = [];
          // The model: who holds a slot, who waits (in order), who has been granted (in order).
          const holding = new Set<number>();
          const waiting: number[] = [];
          const modelGranted: number[] = [];
          const grantNext = (): void => {
            while (holding.size < size && waiting.length > 0) {
              const next = waiting.shift()!;
              holding.add(next);
              modelGranted.push(next);
            }
          };
          for (const op of ops) {
            switch (op.kind) {
              case 'take': {
                const i = takes.length;
                const entry: { release?: () => void; giveUp: () => void } = {
                  giveUp: () => undefined,
                };
                takes.push(entry);
                entry.giveUp = slots.take((release) => {
                  granted.push(i);
                  entry.release = release;
                });
                waiting.push(i);
                grantNext();
                break;
              }
              case 'release':
              case 'giveUp': {
                if (takes.length === 0) break;
                const i = op.which % takes.length;
                if (op.kind === 'release') {
                  takes[i]!.release?.();
                  holding.delete(i);
                  grantNext();
                } else {
                  takes[i]!.giveUp();
                  const at = waiting.indexOf(i);
                  if (at !== -1) waiting.splice(at, 1);
                }
                break;
              }
            }
            expect(granted).toEqual(modelGranted);
            expect(slots.inUse).toBe(holding.size);
            expect(slots.waiting).toBe(waiting.length);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

type DrainOp = { kind: 'wait' } | { kind: 'cancel'; which: number } | { kind: 'drain' };

const drainOpArb: fc.Arbitrary<DrainOp> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'wait' as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('cancel' as const), which: fc.nat() }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'drain' as const }) },
);

/** A socket whose drain the test brings about: who listens for it, and the drain itself. */
function drainableSink(): { sink: Sink; listening: () => number; drain: () => void } {
  let listeners: (() => void)[] = [];
  const sink: Sink = {
    send: () => undefined,
    bufferedAmount: 0,
    close: () => undefined,
    onDrain: (listener) => {
      listeners.push(listener);
      return () => {
        listeners = listeners.filter((l) => l !== listener);
      };
    },
  };
  return {
    sink,
    listening: () => listeners.length,
    drain: () => {
      const due = listeners;
      listeners = [];
      for (const listener of due) listener();
    },
  };
}

describe('DrainWaiters (model)', () => {
  it('tells each waiter once, at the next drain, unless it cancelled; listens for the drain only while one waits', () => {
    fc.assert(
      fc.property(fc.array(drainOpArb, { maxLength: 40 }), (ops) => {
        const { sink, listening, drain } = drainableSink();
        const waiters = new DrainWaiters(sink);
        const model = new WaitersModel();
        const { told, modelTold } = model;
        for (const op of ops) {
          switch (op.kind) {
            case 'wait':
              model.wait((listener) => waiters.wait(listener));
              break;
            case 'cancel':
              model.cancel(op.which);
              break;
            case 'drain':
              drain();
              model.tellAll();
              break;
          }
          expect(told).toEqual(modelTold);
          expect(listening()).toBe(model.waiting.size > 0 ? 1 : 0);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

/*
 * Once its reads and waits are over, each holds its own object alone: 48 bytes (a 24-byte header
 * and three fields). The Set a turn waited in, or a listener, with its hash table, would add
 * about 180 more. The bound sits between 48 and 64.
 */
const BOUND_BYTES_AFTER_USE = 56;
const MADE = 20_000;

const leastOf = (make: () => unknown): number => bytesPerObject(make, { count: MADE, warmUp: 500 });

describe('after use', () => {
  it(`a connection's history read slots hold at most ${BOUND_BYTES_AFTER_USE} bytes once no turn waits`, () => {
    const used = (): Slots => {
      const slots = new Slots(1);
      let release: () => void = () => undefined;
      slots.take((r) => (release = r));
      slots.take((r) => r()); // waits for the first
      slots.take(() => undefined)(); // waits, and is given up
      release();
      return slots;
    };
    expect(leastOf(used)).toBeLessThanOrEqual(BOUND_BYTES_AFTER_USE);
  });

  it(`a connection's drain waiters hold at most ${BOUND_BYTES_AFTER_USE} bytes once none waits`, () => {
    const { sink, drain } = drainableSink();
    const used = (): DrainWaiters => {
      const waiters = new DrainWaiters(sink);
      waiters.wait(() => undefined)(); // cancelled
      waiters.wait(() => undefined);
      drain();
      return waiters;
    };
    expect(leastOf(used)).toBeLessThanOrEqual(BOUND_BYTES_AFTER_USE);
  });
});
