/**
 * What a MessagePack or CBOR message costs the WebSocket input budget (binaryMessageCost), as a
 * property over both codecs: for any JSON value, the cost of its frame is at least the UTF-8
 * bytes of its JSON text (what a JSON client sending it would pay), its frame's bytes, and the
 * floor. The gateway handles that text, whichever encoding carried it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { binaryToText } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { MAX_MESSAGE_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import { DEFAULT_MESSAGE_COST_BYTES, binaryMessageCost } from '../../src/transport/ws-transport.js';

/** JSON values whose text is much larger than their frames, and ordinary ones. */
const jsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ stringUnit: 'binary-ascii' }),
  fc.jsonValue({ stringUnit: 'binary' }),
  fc.jsonValue({ stringUnit: 'grapheme' }),
  fc.array(fc.constantFrom(null, 0, '', '\u0000', {}, []), { maxLength: 2_000, size: 'max' }),
  fc.string({
    unit: fc.constantFrom('\u0001', '\u001f', '"', '\\', 'é', '€', '😀'),
    maxLength: 2_000,
    size: 'max',
  }),
);

const floor = fc.constantFrom(0, 1, DEFAULT_MESSAGE_COST_BYTES, 16 * DEFAULT_MESSAGE_COST_BYTES);

describe.each([msgpack, cbor])('$name: binaryMessageCost', (codec: WireCodec) => {
  it('charges any JSON value at least its JSON text, its frame and the floor', () => {
    fc.assert(
      fc.property(jsonValue, floor, (value, least) => {
        const frame = codec.encode(value);
        const text = binaryToText(codec, frame, MAX_MESSAGE_DEPTH);
        // The gateway reads the value's own text.
        expect(text).toBe(JSON.stringify(value));
        const cost = binaryMessageCost(frame.length, text, least);
        expect(cost).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(value)));
        expect(cost).toBeGreaterThanOrEqual(frame.length);
        expect(cost).toBeGreaterThanOrEqual(least);
        // And no more than the largest of them: a client pays for no work it did not ask.
        expect(cost).toBe(Math.max(Buffer.byteLength(text), frame.length, least));
      }),
      { numRuns: 500 },
    );
  });
});

describe('binaryMessageCost beyond six times the frame', () => {
  it('charges a CBOR frame of half-precision floats (three bytes, 22 characters each) its text', () => {
    const floats = 1_000;
    // A map of three: jsonrpc, method and params, an array of `floats` times -2^-24 (f9 80 01).
    const frame = Uint8Array.from([
      0xa3,
      ...['jsonrpc', '2.0', 'method', 'echo', 'params'].flatMap((s) => [...cbor.encode(s)]),
      0x99,
      floats >> 8,
      floats & 0xff,
      ...Array.from({ length: floats }, () => [0xf9, 0x80, 0x01]).flat(),
    ]);
    const text = binaryToText(cbor, frame, MAX_MESSAGE_DEPTH);
    expect(JSON.parse(text)).toEqual({
      jsonrpc: '2.0',
      method: 'echo',
      params: Array<number>(floats).fill(-(2 ** -24)),
    });
    expect(text.length).toBeGreaterThan(7 * frame.length);
    expect(binaryMessageCost(frame.length, text, DEFAULT_MESSAGE_COST_BYTES)).toBe(text.length);
  });
});
