/**
 * The store behind the hooks, against a model: whatever the order of subscribes, unsubscribes
 * and macrotasks, it runs (one start, then one stop) exactly while someone holds it, where
 * letting go and taking hold again within one macrotask (StrictMode's remount) neither stops
 * nor starts it again. And the registry gives one store per client and key while it is held.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import { SharedStore, storeFor } from '../../src/react/shared-store.js';

class Counting extends SharedStore<number> {
  starts = 0;
  stops = 0;
  constructor() {
    super(0);
  }
  protected start(): void {
    this.starts++;
  }
  protected stop(): void {
    this.stops++;
  }
}

type Step =
  { kind: 'subscribe'; who: number } | { kind: 'unsubscribe'; who: number } | { kind: 'tick' };

// Full-length scripts (at fast-check's default size a script is ~5 steps), so that a store is
// let go and taken again several times within one macrotask before the tick.
const steps = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('subscribe' as const), who: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('unsubscribe' as const), who: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('tick' as const) }),
  ),
  { maxLength: 60, size: 'max' },
);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('SharedStore', () => {
  it('runs exactly while held, a release taking effect one macrotask later', () => {
    fc.assert(
      fc.property(steps, (script: Step[]) => {
        const store = new Counting();
        const held = new Map<number, () => void>();
        // The model.
        let running = false;
        let starts = 0;
        let stops = 0;
        let releasing = false;
        for (const step of script) {
          if (step.kind === 'subscribe') {
            if (held.has(step.who)) continue;
            held.set(
              step.who,
              store.subscribe(() => undefined),
            );
            releasing = false;
            if (!running) {
              running = true;
              starts++;
            }
          } else if (step.kind === 'unsubscribe') {
            const unsubscribe = held.get(step.who);
            if (!unsubscribe) continue;
            held.delete(step.who);
            unsubscribe();
            if (held.size === 0) releasing = true;
          } else {
            vi.advanceTimersByTime(0);
            if (releasing && held.size === 0) {
              running = false;
              stops++;
            }
            releasing = false;
          }
          expect({ starts: store.starts, stops: store.stops, held: store.held }).toEqual({
            starts,
            stops,
            held: running,
          });
        }
      }),
      // What needs a store let go twice within one macrotask takes a few steps in a row out of
      // 60: enough runs to make it, and the shortest case as an example.
      {
        numRuns: 1_000,
        examples: [
          [
            [
              { kind: 'subscribe', who: 0 },
              { kind: 'unsubscribe', who: 0 },
              { kind: 'subscribe', who: 1 },
              { kind: 'unsubscribe', who: 1 },
              { kind: 'tick' },
            ],
          ],
        ],
      },
    );
  });

  it('tells every listener of each change, and the snapshot stays the same object between', () => {
    class Settable extends SharedStore<{ n: number }> {
      constructor() {
        super({ n: 0 });
      }
      put(n: number) {
        this.set({ n });
      }
      protected start(): void {}
      protected stop(): void {}
    }
    const store = new Settable();
    const told: string[] = [];
    store.subscribe(() => told.push('a'));
    store.subscribe(() => told.push('b'));
    const first = store.get();
    expect(store.get()).toBe(first);
    store.put(1);
    expect(told).toEqual(['a', 'b']);
    expect(store.get()).toEqual({ n: 1 });
  });
});

describe('storeFor', () => {
  const client = {} as RpcClient;

  it('gives one store per client and key while it is held, a new one once it is let go', () => {
    const made: Counting[] = [];
    const make = () => {
      const store = new Counting();
      made.push(store);
      return store;
    };
    const store = storeFor(client, 'k', make);
    expect(storeFor(client, 'k', make)).toBe(store);
    expect(storeFor({} as RpcClient, 'k', make)).not.toBe(store);
    const unsubscribe = store.subscribe(() => undefined);
    vi.advanceTimersByTime(0);
    expect(storeFor(client, 'k', make)).toBe(store);
    unsubscribe();
    vi.advanceTimersByTime(0);
    expect(store.stops).toBe(1);
    const next = storeFor(client, 'k', make);
    expect(next).not.toBe(store);
  });

  it('drops a store that no component subscribed to within a macrotask (a render never committed)', () => {
    const store = storeFor(client, 'never', () => new Counting());
    expect(storeFor(client, 'never', () => new Counting())).toBe(store);
    vi.advanceTimersByTime(0);
    expect(storeFor(client, 'never', () => new Counting())).not.toBe(store);
    expect(store.starts).toBe(0);
  });
});
