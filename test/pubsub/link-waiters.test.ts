/*
 * LinkWaiters (src/pubsub/link-waiters.ts): the replays of a node waiting for its broker link,
 * on one onRelinked listener and one poll timer, held only while someone waits. Model-based:
 * random runs of wait, cancel (twice, at times, and after being told), the link going down and
 * up, a relink and a poll tick, against a set. After every step: who was told (each once, only
 * once the broker is ready), and whether the broker's listener and the timer are held (only
 * while someone waits).
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LinkWaiters } from '../../src/pubsub/link-waiters.js';
import { WaitersModel } from '../support/waiters-model.js';

const POLL_MS = 100;

class FakeBroker {
  ready = false;
  readonly listeners = new Set<() => void>();

  onRelinked(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  relink(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

type Op =
  | { kind: 'wait' }
  | { kind: 'cancel'; which: number }
  | { kind: 'ready'; ready: boolean }
  | { kind: 'relink' }
  | { kind: 'tick' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'wait' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), which: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('ready' as const), ready: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'relink' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
);

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('LinkWaiters (model)', () => {
  it('tells each waiter once, only once the broker is ready, and holds a listener and a timer only while someone waits', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 50 }), (ops) => {
        const broker = new FakeBroker();
        const waiters = new LinkWaiters(broker, POLL_MS);
        const model = new WaitersModel();
        const { told, waiting, modelTold } = model;
        const check = (): void => {
          if (broker.ready) model.tellAll();
        };
        for (const op of ops) {
          switch (op.kind) {
            case 'wait':
              model.wait((listener) => waiters.wait(listener));
              break;
            case 'cancel':
              model.cancel(op.which);
              break;
            case 'ready':
              broker.ready = op.ready;
              break;
            case 'relink':
              if (waiting.size > 0) check();
              broker.relink();
              break;
            case 'tick':
              if (waiting.size > 0) check();
              vi.advanceTimersByTime(POLL_MS);
              break;
          }
          // Told: everyone who waited when the broker was found ready, in order; never one
          // that cancelled first.
          expect(told).toEqual(modelTold);
          expect(waiters.waiting).toBe(waiting.size);
          expect(broker.listeners.size).toBe(waiting.size > 0 ? 1 : 0);
          expect(vi.getTimerCount()).toBe(waiting.size > 0 ? 1 : 0);
          expect(new Set(told).size).toBe(told.length);
          for (const i of told) expect(waiting.has(i)).toBe(false);
        }
        // Everyone gives up (a cancel after being told does nothing): nothing is left held.
        for (const cancel of model.cancels) cancel();
        expect(told).toEqual(modelTold);
        expect(broker.listeners.size).toBe(0);
        expect(vi.getTimerCount()).toBe(0);
      }),
      { numRuns: 2_000 },
    );
  });

  it('is told at a poll when the broker is ready again without a reconnect (a hung broker that answers again)', () => {
    const broker = new FakeBroker();
    const waiters = new LinkWaiters(broker, POLL_MS);
    const told: string[] = [];
    waiters.wait(() => told.push('a'));
    vi.advanceTimersByTime(POLL_MS);
    expect(told).toEqual([]);
    broker.ready = true;
    vi.advanceTimersByTime(POLL_MS);
    expect(told).toEqual(['a']);
    expect(vi.getTimerCount()).toBe(0);
    expect(broker.listeners.size).toBe(0);
  });

  it('a broker without onRelinked is polled', () => {
    const broker = { ready: false };
    const waiters = new LinkWaiters(broker, POLL_MS);
    const told: string[] = [];
    waiters.wait(() => told.push('a'));
    broker.ready = true;
    vi.advanceTimersByTime(POLL_MS);
    expect(told).toEqual(['a']);
    expect(waiters.waiting).toBe(0);
  });
});
