/**
 * The cap on JSON values in one incoming message (ClassifyOptions.maxJsonValues, the gateway's
 * limits.maxJsonValues): counted on the raw text, in the depth scan's pass, before and instead
 * of JSON.parse, so a message of a million tiny values never reaches the parser.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseFrame } from '../../src/protocol/classify.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { JsonRefusal, parseJson } from '../../src/protocol/safe-json.js';

afterEach(() => vi.restoreAllMocks());

/** Every value of `value`, itself included: what maxJsonValues counts. */
function referenceCount(value: unknown): number {
  if (Array.isArray(value)) return 1 + value.reduce<number>((n, v) => n + referenceCount(v), 0);
  if (value !== null && typeof value === 'object') {
    return 1 + Object.values(value).reduce<number>((n, v) => n + referenceCount(v), 0);
  }
  return 1;
}

function refusalOf(text: string, maxValues: number): string | undefined {
  const parsed = parseJson(text, Infinity, maxValues);
  return parsed instanceof JsonRefusal ? parsed.reason : undefined;
}

/** A notification whose params hold `n` empty objects: n + 4 values in all. */
function emptyObjects(n: number): string {
  return `{"jsonrpc":"2.0","method":"m","params":[${Array<string>(n).fill('{}').join(',')}]}`;
}

const valuesError = (maxJsonValues: number) => ({
  kind: 'invalid',
  version: '2.0',
  id: null,
  error: { code: ErrorCode.InvalidRequest, message: 'Invalid Request', data: { maxJsonValues } },
});

describe('maxJsonValues: the count', () => {
  it('counts every object, array, string, number and literal, but not keys', () => {
    expect(refusalOf('[{},{}]', 3)).toBeUndefined();
    expect(refusalOf('[{},{}]', 2)).toBe('values');
    // The object, "b" and 1, 2, true, null, the array: 7; the keys "a" and "k" do not count.
    const text = '{"a":[1, 2 ,true,null], "k" : "b"}';
    expect(referenceCount(JSON.parse(text))).toBe(7);
    expect(refusalOf(text, 7)).toBeUndefined();
    expect(refusalOf(text, 6)).toBe('values');
  });

  it('reads quotes, brackets and colons inside strings as text', () => {
    const text = '["[{\\"a\\":1}]",":::", "\\\\"]';
    expect(referenceCount(JSON.parse(text))).toBe(4);
    expect(refusalOf(text, 4)).toBeUndefined();
    expect(refusalOf(text, 3)).toBe('values');
  });

  it('property: the scan refuses a value exactly when it holds more than the cap', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 1, '\t'), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        const count = referenceCount(JSON.parse(text));
        expect(refusalOf(text, count)).toBeUndefined();
        expect(refusalOf(text, count - 1)).toBe('values');
      }),
      { numRuns: 500 },
    );
  });

  it('refuses at the length where the cap can first be passed: 2 × max + 1 characters', () => {
    // [0,0,...,0] of `max` zeros: max + 1 values in 2 × max + 1 characters, the fewest any
    // JSON text of max + 1 values can have (each value takes 2 characters, but one of them).
    const max = 1000;
    const tight = `[${Array<string>(max).fill('0').join(',')}]`;
    expect(tight.length).toBe(2 * max + 1);
    expect(refusalOf(tight, max)).toBe('values');
    expect(refusalOf(tight, max + 1)).toBeUndefined();
    const oneLess = `[${Array<string>(max - 1)
      .fill('0')
      .join(',')}]`;
    expect(refusalOf(oneLess, max)).toBeUndefined();
  });

  it('does not scan a text too short to hold more than the cap', () => {
    const max = 1000;
    // Not JSON, and far more than `max` by the scan's reckoning, but 2 × max characters long:
    // no JSON text this short passes the cap, so it is left to the parser (a syntax error).
    const braces = '{'.repeat(2 * max);
    expect(refusalOf(braces, max)).toBe('syntax');
    expect(refusalOf(`${braces}{`, max)).toBe('values');
  });
});

describe('parseFrame: maxJsonValues', () => {
  it('accepts exactly maxJsonValues values and refuses one more with -32600, data.maxJsonValues, id null', () => {
    const max = 10_000;
    const at = `{"jsonrpc":"2.0","id":7,"method":"m","params":[${Array<string>(max - 5)
      .fill('{}')
      .join(',')}]}`;
    // The message, "2.0", 7, "m", the array and its objects.
    expect(referenceCount(JSON.parse(at))).toBe(max);
    expect(parseFrame(at, { maxJsonValues: max }).messages[0]).toMatchObject({
      kind: 'request',
      id: 7,
    });
    const over = at.replace('[{}', '[{},{}');
    expect(referenceCount(JSON.parse(over))).toBe(max + 1);
    expect(parseFrame(over, { maxJsonValues: max }).messages).toEqual([valuesError(max)]);
  });

  it('refuses without parsing: no JSON.parse, and a text that would not parse gets the same error', () => {
    const parse = vi.spyOn(JSON, 'parse');
    const over = emptyObjects(2000);
    expect(parseFrame(over, { maxJsonValues: 1000 }).messages).toEqual([valuesError(1000)]);
    // Cut short: not JSON at all, yet past the cap before the scan reaches its end.
    const broken = over.slice(0, -10);
    expect(parseFrame(broken, { maxJsonValues: 1000 }).messages).toEqual([valuesError(1000)]);
    expect(parse).not.toHaveBeenCalled();
  });

  it('applies both caps in one pass: whichever the text passes is the one answered', () => {
    let deep = '0';
    for (let i = 0; i < 10; i++) deep = `[${deep}]`;
    expect(parseFrame(deep, { maxDepth: 5, maxJsonValues: 1 }).messages[0]).toMatchObject({
      error: { data: { maxJsonValues: 1 } },
    });
    expect(parseFrame(deep, { maxDepth: 5, maxJsonValues: 100 }).messages[0]).toMatchObject({
      error: { data: { maxDepth: 5 } },
    });
  });

  it('leaves messages alone when no cap is set', () => {
    expect(parseFrame(emptyObjects(20_000)).messages[0]).toMatchObject({ kind: 'notification' });
  });
});
