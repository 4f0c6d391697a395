/**
 * encodeSuccessText: a result serialised beforehand is written as it is, and the reply is the
 * very text encodeSuccess writes for the value itself, whatever the value, id and protocol
 * version, alone, in a batch, and with the id written as the peer sent it (withIdText).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeBatch,
  encodeSuccess,
  encodeSuccessText,
  withIdText,
} from '../../src/protocol/encode.js';
import type { ProtocolVersion } from '../../src/protocol/types.js';
import { validId } from '../support/jsonrpc-arbitraries.js';

const version = fc.constantFrom<ProtocolVersion>('2.0', '1.0');

describe('encodeSuccessText', () => {
  it('writes the text encodeSuccess writes for the value (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), validId, version, (value, id, v) => {
        const json = JSON.stringify(value);
        expect(encodeSuccessText(id, json, v)).toBe(encodeSuccess(id, value, v));
      }),
      { numRuns: 500 },
    );
  });

  it('writes results that look like the frame around them as they are', () => {
    for (const v of ['2.0', '1.0'] as const) {
      for (const value of [null, '"result":null', { result: null }, ['$&', "$'", '$`', '$1']]) {
        const id = '"result":null';
        expect(encodeSuccessText(id, JSON.stringify(value), v)).toBe(encodeSuccess(id, value, v));
      }
    }
  });

  it('is spliced into a batch as it is, next to ordinary replies (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.jsonValue(), validId), { minLength: 1 }), (members) => {
        const mixed = members.map(([value, id], i) =>
          i % 2 === 0 ? encodeSuccessText(id, JSON.stringify(value)) : encodeSuccess(id, value),
        );
        const plain = members.map(([value, id]) => encodeSuccess(id, value));
        expect(encodeBatch(mixed)).toBe(encodeBatch(plain));
      }),
    );
  });

  it('takes the id as the peer wrote it, as encodeSuccess does', () => {
    const json = '{"openrpc":"1.3.2"}';
    expect(withIdText(encodeSuccessText(1.5, json), 1.5, '1.50')).toBe(
      `{"jsonrpc":"2.0","result":${json},"id":1.50}`,
    );
  });
});
