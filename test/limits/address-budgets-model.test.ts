/**
 * The per-address buckets (AddressBudgets) against a model of connections opening, spending and
 * closing over time: entries are counted by the connections holding them, kept after the last
 * closes only until the bucket would be full again (so reconnecting does not refill it), and
 * never more than the bound. An unheld entry goes before it is full only for a new group at the
 * bound, and then the one nearest to full; the heap keeping them by that time stays in order
 * after every step.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AddressBudget, AddressBudgets, PairedBucket } from '../../src/server/address-budgets.js';
import { RateLimit } from '../../src/server/token-bucket.js';

const GROUPS = 'abcdefghijklmnop'.split('');

type Op =
  | { kind: 'open'; group: string }
  | { kind: 'visit'; group: string; amount: number }
  | { kind: 'close'; index: number }
  | { kind: 'spend'; index: number; amount: number }
  | { kind: 'take'; index: number }
  | { kind: 'advance'; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('open' as const), group: fc.constantFrom(...GROUPS) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('close' as const), index: fc.nat(20) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('spend' as const),
      index: fc.nat(20),
      amount: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3_000 })),
    }),
  },
  fc.record({ kind: fc.constant('take' as const), index: fc.nat(20) }),
  // A connection that opens, spends and closes at once: its entry, unless others hold it, goes
  // into the heap of unheld ones, so that runs keep many there (a heap of 6 or more has entries
  // two levels down in both halves, where one moved into a removed slot may have to sift up).
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('visit' as const),
      group: fc.constantFrom(...GROUPS),
      amount: fc.integer({ min: 1, max: 3_000 }),
    }),
  },
  fc.record({
    kind: fc.constant('advance' as const),
    // Steps of a few ms too: an entry must be gone the first millisecond it is full.
    ms: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3_000 })),
  }),
);

interface Connection {
  group: string;
  entry: AddressBudget | undefined;
  bucket: PairedBucket | undefined;
}

/** What the model knows of a group whose connections all closed. */
interface Released {
  entry: AddressBudget;
  /** A new group has since found the table full (so some unheld entry was dropped for it). */
  crowded: boolean;
}

/** The heap of unheld entries, private to AddressBudgets: read for its invariant. */
function heapOf(budgets: AddressBudgets): readonly AddressBudget[] {
  return (budgets as unknown as { unheld: AddressBudget[] }).unheld;
}

/** Each entry knows its slot, and none is full before its parent. */
function expectHeapOrder(heap: readonly AddressBudget[]): void {
  const wrong = heap.findIndex(
    (entry, slot) =>
      entry.slot !== slot || (slot > 0 && entry.fullAt < heap[(slot - 1) >> 1]!.fullAt),
  );
  expect(wrong, 'the first slot out of heap order').toBe(-1);
}

describe('AddressBudgets', () => {
  it('counts connections per entry, keeps an unheld entry only until it is full, and stays within the bound', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2_000 })),
        fc.integer({ min: 1, max: 5_000 }),
        // Small tables (crowding) and ones holding a heap of unheld entries three or four levels
        // deep.
        fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 6, max: 14 })),
        // Full-length runs (at fast-check's default size a run is ~5 steps), so that several
        // unheld entries are kept at once and taken again or dropped from the heap.
        fc.array(op, { maxLength: 150, size: 'max' }),
        (perSecond, burst, maxEntries, ops) => {
          let now = 1_000_000;
          const clock = () => now;
          const limit = new RateLimit(perSecond, burst, clock);
          const own = new RateLimit(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, clock);
          const budgets = new AddressBudgets(
            limit,
            maxEntries,
            (group) => new AddressBudget(limit, group),
          );
          const open: Connection[] = [];
          const released = new Map<string, Released>();
          const held = (group: string) => open.filter((c) => c.group === group && c.entry);
          const unheld = () =>
            GROUPS.map((group) => budgets.peek(group)).filter(
              (entry): entry is AddressBudget => entry !== undefined && entry.refs === 0,
            );

          /** Open a connection of `group`: whether it took the place of an unheld entry. */
          const openOne = (group: string): { connection: Connection; evicting: boolean } => {
            const before = budgets.peek(group);
            const crowding = before === undefined && budgets.size >= maxEntries;
            // The table is full even once the unheld entries full by now are dropped.
            const full = unheld().filter((e) => e.fullAt <= now).length;
            const evicting = crowding && budgets.size - full >= maxEntries;
            const entry = budgets.acquire(group);
            if (entry === undefined) {
              // Only when every entry kept is held by a connection.
              const heldGroups = new Set(open.filter((c) => c.entry).map((c) => c.group));
              expect(heldGroups.size).toBe(maxEntries);
            } else {
              const last = released.get(group);
              if (last && held(group).length === 0 && entry !== last.entry && !last.crowded) {
                // A new bucket only once the old one was full again (within a millisecond).
                expect(last.entry.available()).toBeGreaterThanOrEqual(
                  burst - perSecond / 1000 - 1e-6,
                );
              }
              if (last && entry === last.entry) expect(entry.available()).toBeLessThan(burst);
            }
            if (crowding && entry) for (const r of released.values()) r.crowded = true;
            const connection = { group, entry, bucket: entry && new PairedBucket(own, entry) };
            open.push(connection);
            released.delete(group);
            return { connection, evicting: evicting && entry !== undefined };
          };

          /** Close `connection`: whether it let go of an entry. */
          const closeOne = (connection: Connection): boolean => {
            open.splice(open.indexOf(connection), 1);
            if (!connection.entry) return false;
            budgets.release(connection.entry);
            if (held(connection.group).length === 0) {
              released.set(connection.group, { entry: connection.entry, crowded: false });
            }
            return true;
          };

          for (const step of ops) {
            // The table drops the entries nobody holds that are full when an entry is taken or
            // let go: at each open, and at each close of a connection that held one.
            let swept = false;
            // Whether a new group took the place of the unheld entry nearest to full.
            let evicting = false;
            const waiting = unheld();
            if (step.kind === 'open') {
              swept = true;
              evicting = openOne(step.group).evicting;
            } else if (step.kind === 'visit') {
              swept = true;
              const opened = openOne(step.group);
              evicting = opened.evicting;
              opened.connection.bucket?.spend(step.amount);
              closeOne(opened.connection);
            } else if (step.kind === 'close') {
              if (open.length === 0) continue;
              swept = closeOne(open[step.index % open.length]!);
            } else if (step.kind === 'spend' || step.kind === 'take') {
              if (open.length === 0) continue;
              const bucket = open[step.index % open.length]!.bucket;
              if (step.kind === 'spend') bucket?.spend(step.amount);
              else bucket?.takeBoth();
            } else {
              now += step.ms;
            }

            expect(budgets.size).toBeLessThanOrEqual(maxEntries);
            expectHeapOrder(heapOf(budgets));
            // An unheld entry goes before it is full only for a new group at the bound, and
            // then the one nearest to full.
            const notFull = waiting.filter((e) => e.fullAt > now);
            const dropped = notFull.filter((e) => budgets.peek(e.group) !== e);
            if (evicting) {
              expect(dropped).toHaveLength(1);
              expect(dropped[0]!.fullAt).toBe(Math.min(...notFull.map((e) => e.fullAt)));
            } else {
              expect(dropped).toEqual([]);
            }
            for (const group of GROUPS) {
              const holders = held(group);
              const entry = budgets.peek(group);
              if (holders.length > 0) {
                // Held entries stay, counted by their connections.
                expect(entry).toBe(holders[0]!.entry);
                expect(entry!.refs).toBe(holders.length);
              } else if (entry !== undefined && swept) {
                // As of each take and let go, no entry nobody holds is full.
                expect(entry.refs).toBe(0);
                expect(entry.available()).toBeLessThan(burst);
              }
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('keeps an entry nobody holds until the millisecond its bucket is full, and no longer', () => {
    let now = 0;
    const limit = new RateLimit(1_000, 10, () => now); // a token a millisecond
    const budgets = new AddressBudgets(limit, 10, (group) => new AddressBudget(limit, group));
    const entry = budgets.acquire('a')!;
    entry.spend(3);
    budgets.release(entry);
    now += 2;
    // Reconnecting within the refill finds the same bucket, not a full one.
    expect(budgets.acquire('a')).toBe(entry);
    expect(entry.available()).toBe(9);
    budgets.release(entry);
    now += 1;
    budgets.acquire('b');
    expect(budgets.peek('a')).toBeUndefined();
    expect(budgets.size).toBe(1);
  });

  it('keeps the heap in order when an entry moved into a taken one’s slot must sift up', () => {
    let now = 0;
    const limit = new RateLimit(1, 100, () => now); // full 1 s after each token spent
    const budgets = new AddressBudgets(limit, 10, (group) => new AddressBudget(limit, group));
    // Let go in this order, the heap is [a 1, b 5, c 2, d 6, e 7, f 3] (s until full): f, the
    // last, lies under c, in the other half from d.
    const spent = { a: 1, b: 5, c: 2, d: 6, e: 7, f: 3 };
    const entries = Object.entries(spent).map(([group, tokens]) => {
      const entry = budgets.acquire(group)!;
      entry.spend(tokens);
      budgets.release(entry);
      return entry;
    });
    expect(heapOf(budgets).map((e) => e.group)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    // Taking d again moves f into its slot, under b: f must go up past it.
    expect(budgets.acquire('d')).toBe(entries[3]);
    expectHeapOrder(heapOf(budgets));
    now = 3_000;
    budgets.acquire('x');
    expect(['a', 'b', 'c', 'e', 'f'].filter((group) => budgets.peek(group))).toEqual(['b', 'e']);
  });

  it('at its bound, gives a new group the place of the unheld entry nearest to full, or none', () => {
    const now = 0;
    const limit = new RateLimit(1, 100, () => now);
    const budgets = new AddressBudgets(limit, 2, (group) => new AddressBudget(limit, group));
    const a = budgets.acquire('a')!;
    const b = budgets.acquire('b')!;
    expect(budgets.acquire('c')).toBeUndefined(); // both held
    a.spend(50);
    b.spend(10);
    budgets.release(a);
    budgets.release(b);
    expect(budgets.acquire('c')).toBeDefined();
    expect(budgets.peek('b')).toBeUndefined();
    expect(budgets.peek('a')).toBe(a);
    expect(budgets.size).toBe(2);
  });

  it('takes a token from both buckets or from neither', () => {
    const limit = new RateLimit(0.001, 2, () => 0);
    const budgets = new AddressBudgets(limit, 10, (group) => new AddressBudget(limit, group));
    const entry = budgets.acquire('a')!;
    const first = new PairedBucket(new RateLimit(0.001, 1, () => 0), entry);
    const second = new PairedBucket(new RateLimit(0.001, 5, () => 0), entry);
    expect(first.takeBoth()).toBeUndefined();
    expect(first.takeBoth()).toBe('connection');
    expect(entry.available()).toBe(1);
    expect(second.takeBoth()).toBeUndefined();
    expect(second.takeBoth()).toBe('address');
    expect(second.available()).toBe(4);
  });

  it('spends from both and waits for the longer', () => {
    const limit = new RateLimit(1_000, 1_000, () => 0);
    const budgets = new AddressBudgets(limit, 10, (group) => new AddressBudget(limit, group));
    const entry = budgets.acquire('a')!;
    const bucket = new PairedBucket(new RateLimit(1_000, 10_000, () => 0), entry);
    expect(bucket.spend(500)).toBe(0);
    expect(bucket.spend(1_500)).toBe(1_000); // the address owes 1 000 bytes: 1 s
    expect(new PairedBucket(new RateLimit(100, 100, () => 0), entry).spend(300)).toBe(2_000);
  });
});
