/**
 * fast-check generators of JSON-RPC-shaped input, for the property tests that check replies
 * against test/support/jsonrpc-model.ts.
 */
import fc from 'fast-check';
import type { Id, Json } from './jsonrpc-model.js';

/** Any text, binary strings and strings made of JSON's punctuation included. */
export const anyText = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', ',', ':', '1', 'a', ' ') }),
);

/** The text of a JSON number, by the grammar of RFC 8259: every way to write one. */
export const jsonNumberText: fc.Arbitrary<string> = fc
  .tuple(
    fc.boolean(),
    fc.oneof(
      fc.constant('0'),
      fc
        .tuple(fc.integer({ min: 1, max: 9 }), fc.stringMatching(/^[0-9]{0,30}$/))
        .map(([first, rest]) => `${first}${rest}`),
    ),
    fc.option(fc.stringMatching(/^[0-9]{1,20}$/), { nil: undefined }),
    fc.option(
      fc.tuple(
        fc.constantFrom('e', 'E'),
        fc.constantFrom('', '+', '-'),
        fc.stringMatching(/^[0-9]{1,3}$/),
      ),
      { nil: undefined },
    ),
  )
  .map(
    ([minus, int, frac, exp]) =>
      `${minus ? '-' : ''}${int}${frac === undefined ? '' : `.${frac}`}${exp === undefined ? '' : exp.join('')}`,
  );

/** A few ids, so that duplicates (and rpc.cancel targets) are common. */
export const pooledId = fc.constantFrom<Id>(1, 2, 3, 0, -1, 'a', 'b', '', null);

/** Numbers at the edges of what a double holds, -0 and fractions. */
export const edgeNumberId = fc.constantFrom<Id>(
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  2 ** 64,
  1e308,
  -1e308,
  Number.MIN_VALUE,
  -0,
  0.1,
  -123.456,
  1e-7,
);

/** Valid ids of every kind: pooled, integers, strings (some very long), doubles, edge numbers. */
export const validId: fc.Arbitrary<Id> = fc.oneof(
  { arbitrary: pooledId, weight: 4 },
  { arbitrary: fc.integer(), weight: 3 },
  { arbitrary: fc.string({ maxLength: 16 }), weight: 2 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
  { arbitrary: edgeNumberId, weight: 1 },
  { arbitrary: fc.integer({ min: 100, max: 20_000 }).map((n) => 'i'.repeat(n)), weight: 1 },
);

/** Values of the wrong type for a request member (and a few nearly right strings). */
export const wrongTypeValue: fc.Arbitrary<Json> = fc.oneof(
  fc.boolean(),
  fc.constantFrom<Json>({}, [], '2.0 ', '', '1.0', '2', 2, 2.0, null, 'echo', 0),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
  fc.jsonValue({ maxDepth: 2 }),
);

const smallJson = fc.jsonValue({ maxDepth: 3 });

/** Objects built to look like requests: every member optional, of a right or a random type. */
export function requestShaped(methods: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      jsonrpc: fc.oneof(
        { arbitrary: fc.constant('2.0'), weight: 6 },
        { arbitrary: fc.constantFrom('1.0', '2', 2, null), weight: 1 },
        { arbitrary: smallJson, weight: 1 },
      ),
      method: fc.oneof(
        { arbitrary: fc.constantFrom(...methods), weight: 6 },
        { arbitrary: fc.string(), weight: 2 },
        { arbitrary: smallJson, weight: 1 },
      ),
      params: fc.oneof(
        { arbitrary: fc.array(smallJson, { maxLength: 4 }), weight: 3 },
        { arbitrary: fc.dictionary(fc.string(), smallJson, { maxKeys: 4 }), weight: 3 },
        { arbitrary: smallJson, weight: 2 },
      ),
      id: fc.oneof(
        { arbitrary: fc.string(), weight: 3 },
        { arbitrary: fc.integer(), weight: 3 },
        { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
        { arbitrary: fc.constant(null), weight: 2 },
        { arbitrary: smallJson, weight: 2 },
      ),
    },
    { requiredKeys: [] },
  );
}

/** Well-formed requests and notifications of `methods`, so the valid paths are exercised often too. */
export function wellFormedRequest(
  methods: readonly string[],
): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      jsonrpc: fc.constant('2.0'),
      method: fc.constantFrom(...methods),
      params: fc.oneof(
        fc.array(smallJson, { maxLength: 4 }),
        fc.dictionary(fc.string(), smallJson, { maxKeys: 4 }),
      ),
      id: fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true }), fc.constant(null)),
    },
    { requiredKeys: ['jsonrpc', 'method'] },
  );
}
