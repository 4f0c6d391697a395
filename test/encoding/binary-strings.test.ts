/**
 * Strings in MessagePack and CBOR frames are JSON strings: bytes that are not well-formed UTF-8
 * are refused before decoding (a decoder would hand the handler U+FFFD, a character the peer
 * never sent), and CBOR's `undefined`, which JSON has no value for, is refused as MessagePack's
 * is.
 */
import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** `bytes` as a string of the codec: MessagePack str32, CBOR text string with a 4-byte length. */
function stringOf(codec: WireCodec, bytes: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head[0] = codec.name === 'msgpack' ? 0xdb : 0x7a;
  head.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([head, bytes]);
}

/** A map of one entry, `key` to `value`, in the codec. */
function mapOf(codec: WireCodec, key: Buffer, value: Buffer): Buffer {
  return Buffer.concat([Buffer.from([codec.name === 'msgpack' ? 0x81 : 0xa1]), key, value]);
}

/** A request to `method` with the encoded `param` as its only param. */
function request(codec: WireCodec, method: Uint8Array, param: Buffer): Buffer {
  const text = (s: string) => stringOf(codec, Buffer.from(s));
  return Buffer.concat([
    Buffer.from([codec.name === 'msgpack' ? 0x84 : 0xa4]),
    text('jsonrpc'),
    text('2.0'),
    text('id'),
    Buffer.from([1]),
    text('method'),
    stringOf(codec, method),
    text('params'),
    Buffer.from([codec.name === 'msgpack' ? 0x91 : 0x81]),
    param,
  ]);
}

const parseError = { jsonrpc: '2.0', id: null, error: { code: ErrorCode.ParseError } };

describe.each([msgpack, cbor])('$name strings', (codec: WireCodec) => {
  it('refuses a string exactly when its bytes are not UTF-8, as a value or a key', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 12 }), (bytes) => {
        const expected = isUtf8(bytes) ? 'ok' : 'utf8';
        expect(codec.check(stringOf(codec, bytes), 8)).toBe(expected);
        expect(codec.check(mapOf(codec, stringOf(codec, bytes), Buffer.from([0])), 8)).toBe(
          expected,
        );
      }),
      { numRuns: 2_000 },
    );
  });

  it('answers a frame with a string that is not UTF-8 -32700; the handler never runs', async () => {
    const seen: unknown[] = [];
    const { url, gateway } = await resources.gateway({ encodings: ['json', codec.name] });
    gateway.method('echo', (params) => {
      seen.push(params);
      return params;
    });
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    const bad = Buffer.from('a\xc0\xafb\xed\xa0\x80', 'latin1'); // overlong, surrogate
    raw.socket.send(request(codec, Buffer.from('echo'), stringOf(codec, bad)));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject(parseError);
    raw.socket.send(request(codec, Buffer.from('ech\xff', 'latin1'), stringOf(codec, bad)));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject(parseError);
    raw.socket.send(request(codec, Buffer.from('echo'), stringOf(codec, Buffer.from('é'))));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject({ id: 1, result: ['é'] });
    expect(seen).toEqual([['é']]);
  });
});

describe('cbor undefined', () => {
  it('is refused -32700 wherever it stands, as MessagePack refuses its own', async () => {
    const { url, gateway } = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
    gateway.method('echo', (params) => params);
    for (const codec of [cbor, msgpack]) {
      const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
      for (const message of [
        { jsonrpc: '2.0', id: undefined, method: 'echo', params: [1] },
        { jsonrpc: '2.0', id: 2, method: 'echo', params: [undefined] },
      ]) {
        raw.socket.send(codec.encode(message));
        expect((await within(raw.next(), `${codec.name}'s answer`)).value).toMatchObject(
          parseError,
        );
      }
    }
    expect(cbor.check(Uint8Array.of(0xf7), 8)).toBe('syntax');
  });
});
