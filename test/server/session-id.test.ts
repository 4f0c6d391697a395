// Session ids (src/server/session-id.ts): the node's prefix, then 22 random letters and digits.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SESSION_ID_RANDOM_CHARS, sessionIdOf } from '../../src/server/session-id.js';

describe('session ids', () => {
  it('are the prefix and 22 letters and digits, never a "-", all different', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), (node) => {
        const prefix = `${node}-`;
        const ids = Array.from({ length: 50 }, () => sessionIdOf(prefix));
        for (const id of ids) {
          expect(id.startsWith(prefix)).toBe(true);
          expect(id.slice(prefix.length)).toMatch(/^[0-9A-Za-z]{22}$/);
          // The node id is what comes before the last '-'.
          expect(id.slice(0, id.lastIndexOf('-'))).toBe(node);
        }
        expect(new Set(ids).size).toBe(ids.length);
      }),
    );
    expect(SESSION_ID_RANDOM_CHARS).toBe(22);
  });

  it('use every one of the 62 letters and digits, about equally', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2_000; i++) {
      for (const c of sessionIdOf('n-').slice(2)) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    expect(counts.size).toBe(62);
    // 44,000 letters: about 710 each; a bias (a letter twice as likely) would be far outside.
    for (const n of counts.values()) expect(n).toBeGreaterThan(450);
    for (const n of counts.values()) expect(n).toBeLessThan(1_000);
  });
});
