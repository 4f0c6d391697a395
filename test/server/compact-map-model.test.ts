/*
 * Model-based property test of CompactMap (src/server/compact-map.ts), a connection's table of
 * subscriptions, against a Map: random runs of set (a new key or one it has), get, has,
 * delete (of keys it has and has not), and clear, from a small pool of keys (0 and -0, NaN
 * among them, as a Map compares keys). After every step its size, its entries in order (by
 * iteration, by `entries()` and by `values()`) and every key's `get` and `has` are the Map's,
 * through the lone entry held inline, the move to a Map at the second key, and the return to
 * inline once empty.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CompactMap } from '../../src/server/compact-map.js';

const KEYS: unknown[] = ['0x1', '0x2', '0x3', 0, -0, Number.NaN];

type Op =
  { kind: 'set'; key: number; value: number } | { kind: 'delete'; key: number } | { kind: 'clear' };

const keyArb = fc.nat({ max: KEYS.length - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ kind: fc.constant('set' as const), key: keyArb, value: fc.nat() }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const) }) },
);

function check(compact: CompactMap<unknown, number>, model: Map<unknown, number>): void {
  expect(compact.size).toBe(model.size);
  expect([...compact]).toEqual([...model]);
  expect([...compact.entries()]).toEqual([...model.entries()]);
  expect([...compact.values()]).toEqual([...model.values()]);
  for (const key of KEYS) {
    expect(compact.get(key)).toBe(model.get(key));
    expect(compact.has(key)).toBe(model.has(key));
  }
}

describe('CompactMap (model)', () => {
  it('behaves as a Map through every step', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 30 }), (ops) => {
        const compact = new CompactMap<unknown, number>();
        const model = new Map<unknown, number>();
        for (const op of ops) {
          switch (op.kind) {
            case 'set':
              expect(compact.set(KEYS[op.key], op.value)).toBe(compact);
              model.set(KEYS[op.key], op.value);
              break;
            case 'delete':
              expect(compact.delete(KEYS[op.key])).toBe(model.delete(KEYS[op.key]));
              break;
            case 'clear':
              compact.clear();
              model.clear();
              break;
          }
          check(compact, model);
        }
      }),
      { numRuns: Number(process.env['FC_RUNS'] ?? 2000) },
    );
  });

  it('an entry deleted while the table is iterated is not visited, as in a Map', () => {
    const compact = new CompactMap<string, number>().set('a', 1).set('b', 2).set('c', 3);
    const seen: string[] = [];
    for (const [key] of compact) {
      seen.push(key);
      if (key === 'a') compact.delete('b');
    }
    expect(seen).toEqual(['a', 'c']);
  });
});
