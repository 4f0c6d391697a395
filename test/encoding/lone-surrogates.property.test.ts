/**
 * Every string round-trips through MessagePack and CBOR, or the message holding it is refused
 * precisely: as a property over both codecs and strings of any UTF-16 code units (lone
 * surrogates, pairs, long strings), as values and as keys. The gateway's own checks read what
 * the encoders write, and the check that stands in for String.prototype.isWellFormed where a
 * browser lacks it agrees with it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { binaryToText, encodeOutgoing, textToBinary } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { assertEncodable } from '../../src/encoding/encoded-depth.js';
import { isWellFormedByPattern } from '../../src/encoding/lone-surrogates.js';
import { msgpack } from '../../src/msgpack.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';

const wellFormed = (text: string): boolean =>
  (text as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Strings of any code units, lone surrogates and pairs among them, short and long. */
const anyString = fc
  .array(
    fc.oneof(
      fc.constantFrom('a', 'é', '€', '😀', '\ud800', '\udbff', '\udc00', '\udfff', '"', '\\'),
      fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)),
    ),
    { maxLength: 90 },
  )
  .map((units) => units.join(''));

/** A JSON value whose strings (values and keys) are drawn from `anyString`. */
const value = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    anyString,
    fc.constantFrom(1, null, true),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(anyString, tie('value'), { maxKeys: 3 }),
  ),
})).value;

/** Whether a value holds a string, as a value or a key, that is not well-formed. */
function holdsLone(item: unknown): boolean {
  if (typeof item === 'string') return !wellFormed(item);
  if (Array.isArray(item)) return item.some(holdsLone);
  if (typeof item === 'object' && item !== null) {
    return Object.entries(item).some(([key, child]) => !wellFormed(key) || holdsLone(child));
  }
  return false;
}

const kind = fc.constantFrom('response', 'notification', 'request', 'batch');

function messageText(which: string, data: unknown): string {
  const call = { jsonrpc: '2.0', method: 'm', params: { v: data }, id: 7 };
  if (which === 'response') return JSON.stringify({ jsonrpc: '2.0', result: data, id: 7 });
  if (which === 'notification')
    return JSON.stringify({ jsonrpc: '2.0', method: 'm', params: [data] });
  if (which === 'request') return JSON.stringify(call);
  return JSON.stringify([call, { jsonrpc: '2.0', result: 1, id: 8 }]);
}

describe.each([msgpack, cbor])('$name', (codec: WireCodec) => {
  it('property: every string round-trips, or the message holding it is refused precisely', () => {
    fc.assert(
      fc.property(kind, value, (which, data) => {
        const text = messageText(which, data);
        const outgoing = encodeOutgoing(codec, text);
        if (!holdsLone(data)) {
          expect(outgoing.refused).toEqual([]);
          expect(codec.check(outgoing.bytes!, 64)).toBe('ok');
          expect(codec.decode(outgoing.bytes!)).toEqual(JSON.parse(text));
          expect(binaryToText(codec, outgoing.bytes!, 64)).toBe(text);
          return;
        }
        const reason = expect.stringMatching(/lone surrogate/);
        if (which === 'response') {
          expect(outgoing.refused).toEqual([]);
          expect(codec.decode(outgoing.bytes!)).toEqual({
            jsonrpc: '2.0',
            error: { code: ErrorCode.InternalError, message: 'Internal error', data: { reason } },
            id: 7,
          });
        } else {
          // Only the call goes; a batch's response stays in the frame.
          expect(outgoing.refused).toEqual([{ message: expect.anything(), reason }]);
          if (which === 'batch') {
            expect(codec.decode(outgoing.bytes!)).toEqual([{ jsonrpc: '2.0', result: 1, id: 8 }]);
          } else expect(outgoing.bytes).toBeUndefined();
          expect(() => textToBinary(codec, text)).toThrow(/lone surrogate/);
        }
      }),
      { numRuns: 1_500 },
    );
  });
});

describe('the checks of well-formed strings', () => {
  it('property: the pattern agrees with String.prototype.isWellFormed', () => {
    fc.assert(
      fc.property(anyString, (text) => {
        expect(isWellFormedByPattern(text)).toBe(wellFormed(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it('property: data entering the gateway is refused exactly when a string holds one', () => {
    fc.assert(
      fc.property(value, (data) => {
        const enters = () => assertEncodable(JSON.stringify(data), 'data');
        if (holdsLone(data)) expect(enters).toThrow(TypeError);
        else expect(enters).not.toThrow();
      }),
      { numRuns: 1_500 },
    );
  });
});
