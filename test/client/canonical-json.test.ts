import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/client/canonical-json.js';

describe('canonicalJson (the key two subscriptions share when their params are equal)', () => {
  it('is the same whatever the key order, at every level; arrays keep their order', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, 1], c: null } })).toBe(
      canonicalJson({ a: { c: null, d: [2, 1] }, b: 1 }),
    );
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('keeps an own "__proto__" key as a key, so different params do not share a key', () => {
    const one = JSON.parse('{"__proto__":{"room":1}}') as unknown;
    const two = JSON.parse('{"__proto__":{"room":2}}') as unknown;
    expect(canonicalJson(one)).toBe('{"__proto__":{"room":1}}');
    expect(canonicalJson(one)).not.toBe(canonicalJson(two));
  });

  it('throws for cycles, as JSON.stringify does', () => {
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    expect(() => canonicalJson(cycle)).toThrow(TypeError);
  });
});
