/**
 * A map key in MessagePack or CBOR is a string, as every key of a JSON object is: any other type
 * at a key (an integer, nil or null, a boolean, a float, a 64-bit integer, an array, a map) is
 * refused -32700 like every type JSON has no counterpart for, never turned into a string that
 * would collide with the string key spelled the same (1 and "1").
 */
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

const hex = (text: string): Buffer => Buffer.from(text.replace(/\s+/g, ''), 'hex');

/** Encoded keys of every type but a string, each with its name. */
const KEYS: Record<WireCodec['name'], [string, string][]> = {
  msgpack: [
    ['int 1', '01'],
    ['negative int', 'ff'],
    ['nil', 'c0'],
    ['true', 'c3'],
    ['float 1.5', 'cb 3ff8000000000000'],
    ['float32', 'ca 3fc00000'],
    ['uint64', 'cf ffffffffffffffff'],
    ['array', '92 01 02'],
    ['map', '80'],
  ],
  cbor: [
    ['int 1', '01'],
    ['negative int', '20'],
    ['null', 'f6'],
    ['true', 'f5'],
    ['float 1.5', 'fb 3ff8000000000000'],
    ['half float', 'f9 3e00'],
    ['uint64', '1b ffffffffffffffff'],
    ['array', '82 01 02'],
    ['map', 'a0'],
  ],
};

/** A map of one entry: `key` (encoded) to the integer 1. */
function mapWithKey(codec: WireCodec, key: Buffer): Buffer {
  return Buffer.concat([hex(codec.name === 'msgpack' ? '81' : 'a1'), key, hex('01')]);
}

/** A request to `see` whose params are `params` (encoded). */
function request(codec: WireCodec, params: Buffer): Buffer {
  const head = codec.encode({ jsonrpc: '2.0', id: 1, method: 'see', params: 0 });
  // The encoded `params: 0` ends the frame: its value, the single byte 00, is replaced.
  return Buffer.concat([head.subarray(0, head.length - 1), params]);
}

describe.each([msgpack, cbor])('$name map keys', (codec: WireCodec) => {
  it.each(KEYS[codec.name])('refuses a key %s as syntax, at any depth', (_name, key) => {
    const map = mapWithKey(codec, hex(key));
    expect(codec.check(map, 8)).toBe('syntax');
    expect(codec.check(request(codec, map), 8)).toBe('syntax');
    // The top-level map's own key, and one inside an array.
    const arrayOf = Buffer.concat([hex(codec.name === 'msgpack' ? '91' : '81'), map]);
    expect(codec.check(arrayOf, 8)).toBe('syntax');
    // The same map with the string key "1" passes.
    expect(codec.check(mapWithKey(codec, Buffer.from(codec.encode('1'))), 8)).toBe('ok');
  });

  it('property: a map passes exactly when all its keys are strings', () => {
    const key = fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.integer(),
      fc.constant(null),
      fc.boolean(),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(key, fc.integer()), { maxLength: 4 }), (entries) => {
        // Written entry by entry: an encoder given a Map may tag it (cbor-x does).
        const head = (codec.name === 'msgpack' ? 0x80 : 0xa0) | entries.length;
        const bytes = Buffer.concat([
          Buffer.from([head]),
          ...entries.flatMap(([k, v]) => [codec.encode(k), codec.encode(v)]),
        ]);
        const allStrings = entries.every(([k]) => typeof k === 'string');
        expect(codec.check(bytes, 8)).toBe(allStrings ? 'ok' : 'syntax');
      }),
      { numRuns: 500 },
    );
  });

  it('answers a frame with a key that is not a string -32700; the handler never runs', async () => {
    const seen: unknown[] = [];
    const { url, gateway } = await resources.gateway({ encodings: ['json', codec.name] });
    gateway.method('see', (params) => {
      seen.push(params);
      return JSON.stringify(params);
    });
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    for (const [name, key] of KEYS[codec.name]) {
      raw.socket.send(request(codec, mapWithKey(codec, hex(key))));
      expect((await within(raw.next(), `the answer to a key ${name}`)).value).toMatchObject({
        jsonrpc: '2.0',
        id: null,
        error: { code: ErrorCode.ParseError },
      });
    }
    raw.socket.send(request(codec, mapWithKey(codec, Buffer.from(codec.encode('1')))));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject({
      id: 1,
      result: '{"1":1}',
    });
    expect(seen).toEqual([{ 1: 1 }]);
  });
});
