/**
 * Utf8Budget (src/cli/utf8-budget.ts), the count behind the CLI's bound on notification text
 * before the subscribe answer: against a model that measures every text, it says the same after
 * each text, measures each text at most once, and measures nothing while lengths decide.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Utf8Budget } from '../../src/cli/utf8-budget.js';

/** Text of 1-, 2-, 3- and 4-byte characters, and any code point (lone surrogates included). */
const text = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', 'é', '語', '😀'), maxLength: 24 }),
  fc.string({ unit: 'binary', maxLength: 24 }),
);

describe('Utf8Budget', () => {
  it('says what a model that measures every text says, and measures each text at most once', () => {
    fc.assert(
      fc.property(fc.nat({ max: 200 }), fc.array(text, { maxLength: 40 }), (maxBytes, texts) => {
        const budget = new Utf8Budget(maxBytes);
        let bytes = 0;
        let units = 0;
        for (const added of texts) {
          bytes += Buffer.byteLength(added, 'utf8');
          units += added.length;
          expect(budget.add(added)).toBe(bytes <= maxBytes);
          expect(budget.measuredUnits).toBeLessThanOrEqual(units);
        }
      }),
    );
  });

  it('measures nothing while 3 times the length keeps within the bound, or a length passes it', () => {
    fc.assert(
      fc.property(fc.array(text, { maxLength: 40 }), (texts) => {
        const units = texts.join('').length;
        const roomy = new Utf8Budget(3 * units);
        for (const added of texts) expect(roomy.add(added)).toBe(true);
        expect(roomy.measuredUnits).toBe(0);
        if (units === 0) return;
        const joined = texts.join('');
        const short = new Utf8Budget(joined.length - 1);
        expect(short.add(joined)).toBe(false);
        expect(short.measuredUnits).toBe(0);
      }),
    );
  });

  it('measures when the length cannot decide: 6 ASCII characters within 16 bytes, 6 of 3 bytes past it', () => {
    const ascii = new Utf8Budget(16);
    expect(ascii.add('abcdef')).toBe(true);
    expect(ascii.measuredUnits).toBe(6);
    const cjk = new Utf8Budget(16);
    expect(cjk.add('語語語')).toBe(true);
    expect(cjk.add('語語語')).toBe(false);
  });
});
