import { describe, expect, it } from 'vitest';
import { binaryToText } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';

const message = {
  jsonrpc: '2.0',
  id: 7,
  method: 'echo',
  params: [1.5, 'text', null, true, false, { nested: [1, -3, 2 ** 40, 'é'] }, []],
};

/** An array nested `levels` deep, in MessagePack (fixarray of one) or CBOR (array of one). */
function nested(codec: WireCodec, levels: number): Uint8Array {
  const opener = codec.name === 'msgpack' ? 0x91 : 0x81;
  const bytes = new Uint8Array(levels + 1).fill(opener);
  bytes[levels] = codec.name === 'msgpack' ? 0x90 : 0x80; // the innermost, empty
  return bytes;
}

describe.each([msgpack, cbor])('$name structure check', (codec) => {
  it('round-trips a JSON-RPC message and passes the check', () => {
    const bytes = codec.encode(message);
    expect(codec.check(bytes, 64)).toBe('ok');
    expect(codec.decode(bytes)).toEqual(message);
    expect(JSON.parse(binaryToText(codec, bytes, 64))).toEqual(message);
  });

  it('carries its own conversions between frames and JSON text', () => {
    const bytes = codec.encode(message);
    expect(codec.toText(bytes, 64)).toBe(binaryToText(codec, bytes, 64));
    expect(codec.decode(codec.toBinary(JSON.stringify(message)))).toEqual(message);
    expect(codec.toText(nested(codec, 100), 64)).toBe(binaryToText(codec, nested(codec, 100), 64));
  });

  it('measures depth as JSON does', () => {
    expect(codec.check(nested(codec, 63), 64)).toBe('ok'); // 64 levels counting the innermost
    expect(codec.check(nested(codec, 64), 64)).toBe('depth');
    // A million levels: refused by the walk, with no recursion and no stack overflow.
    expect(codec.check(nested(codec, 1_000_000), 64)).toBe('depth');
  });

  it('refuses every truncation of a valid value', () => {
    const bytes = codec.encode(message);
    for (let length = 0; length < bytes.length; length++) {
      expect(codec.check(bytes.subarray(0, length), 64)).toBe('syntax');
    }
  });

  it('refuses trailing bytes', () => {
    const bytes = codec.encode(message);
    expect(codec.check(new Uint8Array([...bytes, 0]), 64)).toBe('syntax');
  });

  it('refuses binary strings', () => {
    expect(codec.check(codec.encode(new Uint8Array([1, 2, 3])), 64)).toBe('syntax');
  });

  it('answers a too-deep value with text the engine reads as too deep', () => {
    const text = binaryToText(codec, nested(codec, 100), 64);
    expect(text.length).toBe(130);
  });
});

describe('msgpack bad input', () => {
  it('refuses a length larger than the bytes left (array32 of 2^32-1 items in 5 bytes)', () => {
    expect(msgpack.check(new Uint8Array([0xdd, 0xff, 0xff, 0xff, 0xff]), 64)).toBe('syntax');
    expect(msgpack.check(new Uint8Array([0xdf, 0x7f, 0xff, 0xff, 0xff, 0xc0]), 64)).toBe('syntax');
    expect(msgpack.check(new Uint8Array([0xdb, 0xff, 0xff, 0xff, 0xff, 0x61]), 64)).toBe('syntax');
  });

  it('refuses ext types, records included, and the unused 0xc1', () => {
    expect(msgpack.check(new Uint8Array([0xd4, 0x01, 0x00]), 64)).toBe('syntax'); // fixext 1
    expect(msgpack.check(new Uint8Array([0xc7, 0x01, 0x72, 0x00]), 64)).toBe('syntax'); // ext 8
    expect(msgpack.check(new Uint8Array([0xc1]), 64)).toBe('syntax');
  });
});

describe('cbor bad input', () => {
  it('refuses a tag bomb: tags nested a million deep, and a single tag', () => {
    const bomb = new Uint8Array(1_000_001).fill(0xc6); // tag 6, again and again
    bomb[1_000_000] = 0x00;
    expect(cbor.check(bomb, 64)).toBe('syntax');
    expect(cbor.check(new Uint8Array([0xc1, 0x00]), 64)).toBe('syntax'); // tag 1 (epoch time)
    expect(cbor.check(new Uint8Array([0xd8, 0x1c, 0x80]), 64)).toBe('syntax'); // tag 28 shareable
  });

  it('refuses lengths larger than the bytes left, indefinite lengths and simple values', () => {
    // array with a 64-bit count
    expect(cbor.check(new Uint8Array([0x9b, 0, 0, 0, 1, 0, 0, 0, 0, 0]), 64)).toBe('syntax');
    expect(cbor.check(new Uint8Array([0x7a, 0xff, 0xff, 0xff, 0xff, 0x61]), 64)).toBe('syntax');
    expect(cbor.check(new Uint8Array([0x9f, 0x01, 0xff]), 64)).toBe('syntax'); // indefinite
    expect(cbor.check(new Uint8Array([0xf0]), 64)).toBe('syntax'); // simple(16)
    expect(cbor.check(new Uint8Array([0x1c]), 64)).toBe('syntax'); // reserved size
  });

  it('reads floats of every width and the JSON simple values', () => {
    for (const bytes of [
      [0xf9, 0x3c, 0x00],
      [0xfa, 0x3f, 0xc0, 0x00, 0x00],
      [0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0],
      [0xf4],
      [0xf5],
      [0xf6],
    ]) {
      expect(cbor.check(new Uint8Array(bytes), 64)).toBe('ok');
    }
  });

  it('refuses NaN and the infinities at every float width, and takes every finite float', () => {
    const nonFinite = [
      [0xf9, 0x7c, 0x00], // half +Infinity
      [0xf9, 0xfc, 0x00], // half -Infinity
      [0xf9, 0x7e, 0x00], // half NaN
      [0xfa, 0x7f, 0x80, 0, 0], // single +Infinity
      [0xfa, 0xff, 0xc0, 0, 0], // single NaN
      [0xfb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0], // double +Infinity
      [0xfb, 0xff, 0xf8, 0, 0, 0, 0, 0, 0], // double NaN
    ];
    for (const bytes of nonFinite) expect(cbor.check(new Uint8Array(bytes), 64)).toBe('syntax');
    const finite = [
      [0xf9, 0x7b, 0xff], // half 65504, the largest
      [0xfa, 0x7f, 0x7f, 0xff, 0xff], // single, the largest
      [0xfb, 0x7f, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // double, the largest
      [0xfb, 0x80, 0, 0, 0, 0, 0, 0, 0], // -0
    ];
    for (const bytes of finite) expect(cbor.check(new Uint8Array(bytes), 64)).toBe('ok');
    expect(msgpack.check(new Uint8Array([0xca, 0x7f, 0x80, 0, 0]), 64)).toBe('syntax');
    expect(msgpack.check(new Uint8Array([0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0]), 64)).toBe('syntax');
    expect(msgpack.check(new Uint8Array([0xcb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0]), 64)).toBe('syntax');
    expect(msgpack.check(new Uint8Array([0xca, 0x7f, 0x7f, 0xff, 0xff]), 64)).toBe('ok');
    expect(msgpack.check(msgpack.encode([1.5, -0, Number.MAX_VALUE, Number.MIN_VALUE]), 64)).toBe(
      'ok',
    );
    // Each encoder's own output for them, too.
    for (const codec of [msgpack, cbor]) {
      for (const value of [NaN, Infinity, -Infinity]) {
        expect(codec.check(codec.encode({ id: value }), 64)).toBe('syntax');
      }
    }
  });
});
