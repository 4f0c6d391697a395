/**
 * limits.maxJsonValues on binary frames (MessagePack, CBOR): the structure walk that checks
 * depth before decoding also counts values as JSON text is counted (each map, array and scalar
 * one; map keys none), so a frame of more values than the cap is answered -32600 with
 * `data: { maxJsonValues }`, id null, without being decoded or turned into JSON text.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { binaryToText, withValueCap } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { parseFrame } from '../../src/protocol/classify.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { defaultLimits } from '../../src/server/options.js';
import { Resources } from '../support/resources.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(async () => {
  vi.restoreAllMocks();
  await resources.cleanup();
});

/** Every value of `value`, itself included: what maxJsonValues counts (keys do not count). */
function referenceCount(value: unknown): number {
  if (Array.isArray(value)) return 1 + value.reduce<number>((n, v) => n + referenceCount(v), 0);
  if (value !== null && typeof value === 'object') {
    return 1 + Object.values(value).reduce<number>((n, v) => n + referenceCount(v), 0);
  }
  return 1;
}

/** A request whose params hold `objects` empty maps: objects + 5 values in all. */
function requestOf(codec: WireCodec, objects: number, id = 7): Uint8Array {
  const params = Array.from({ length: objects }, () => ({}));
  return codec.encode({ jsonrpc: '2.0', id, method: 'echo', params });
}

/** One MiB: an array32 header and a million empty maps (MessagePack 0x80, CBOR 0xa0). */
function mebibyteOfEmptyMaps(codec: WireCodec): Uint8Array {
  const bytes = new Uint8Array(1 << 20);
  bytes[0] = codec === msgpack ? 0xdd : 0x9a;
  new DataView(bytes.buffer).setUint32(1, bytes.length - 5);
  bytes.fill(codec === msgpack ? 0x80 : 0xa0, 5);
  return bytes;
}

const valuesError = (maxJsonValues: number) => ({
  code: ErrorCode.InvalidRequest,
  message: 'Invalid Request',
  data: { maxJsonValues },
});

describe.each([msgpack, cbor])('$name: maxJsonValues', (codec) => {
  it('counts every map, array and scalar, but not keys', () => {
    const value = { a: [1, 2, true, null], k: 'b', m: {} };
    expect(referenceCount(value)).toBe(8);
    expect(codec.check(codec.encode(value), 64, 8)).toBe('ok');
    expect(codec.check(codec.encode(value), 64, 7)).toBe('values');
  });

  it('property: the walk refuses a value exactly when it holds more than the cap', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const bytes = codec.encode(value);
        const count = referenceCount(codec.decode(bytes));
        expect(codec.check(bytes, Infinity, count)).toBe('ok');
        expect(codec.check(bytes, Infinity, count - 1)).toBe('values');
      }),
      { numRuns: 500 },
    );
  });

  it('accepts exactly maxJsonValues values; one more is refused precisely and never decoded', () => {
    const max = 1_000;
    const decode = vi.spyOn(codec, 'decode');
    const at = binaryToText(codec, requestOf(codec, max - 5), 64, max);
    expect(decode).toHaveBeenCalledTimes(1);
    expect(parseFrame(at, { maxDepth: 64, maxJsonValues: max }).messages[0]).toMatchObject({
      kind: 'request',
      id: 7,
    });
    decode.mockClear();
    const over = binaryToText(codec, requestOf(codec, max - 4), 64, max);
    expect(decode).not.toHaveBeenCalled();
    expect(parseFrame(over, { maxDepth: 64, maxJsonValues: max }).messages).toEqual([
      { kind: 'invalid', version: '2.0', id: null, error: valuesError(max) },
    ]);
  });

  it('the depth the walk reaches first is the one answered, as in JSON', () => {
    const deep = codec.encode([[[[[[[[[[0]]]]]]]]]]);
    expect(codec.check(deep, 5, 1)).toBe('values');
    expect(codec.check(deep, 5, 100)).toBe('depth');
  });

  it('withValueCap: the cap applies to every frame the codec reads, the free conversion too', () => {
    const capped = withValueCap(codec, 100);
    expect(capped.check(requestOf(codec, 95), 64)).toBe('ok');
    expect(capped.check(requestOf(codec, 96), 64)).toBe('values');
    const over = requestOf(codec, 96);
    expect(binaryToText(capped, over, 64)).toBe(capped.toText(over, 64));
    expect(parseFrame(binaryToText(capped, over, 64), { maxJsonValues: 100 }).messages).toEqual([
      { kind: 'invalid', version: '2.0', id: null, error: valuesError(100) },
    ]);
    expect(JSON.parse(capped.toText(requestOf(codec, 95), 64))).toEqual(
      codec.decode(requestOf(codec, 95)),
    );
  });

  it('a gateway refuses a frame over limits.maxJsonValues undecoded, and the connection goes on', async () => {
    const running = await resources.gateway({ encodings: ['json', codec.name] });
    running.gateway.method('echo', (params) => (params as unknown[]).length);
    const raw = await rawBinarySocket(resources, running.url, [codec.subprotocol], codec.decode);
    const max = defaultLimits.maxJsonValues;
    raw.socket.send(requestOf(codec, max - 5, 1));
    expect((await raw.next()).value).toEqual({ jsonrpc: '2.0', id: 1, result: max - 5 });

    // The socket decodes the answers with the function it was given, not through the spy.
    const decode = vi.spyOn(codec, 'decode');
    raw.socket.send(requestOf(codec, max - 4, 2));
    const refusal = await raw.next();
    raw.socket.send(mebibyteOfEmptyMaps(codec));
    const bigRefusal = await raw.next();
    expect(decode).not.toHaveBeenCalled();
    const expected = { jsonrpc: '2.0', id: null, error: valuesError(max) };
    expect(refusal.value).toEqual(expected);
    expect(bigRefusal.value).toEqual(expected);
    // The spy sees the gateway's decoding: the next frame, under the cap, is decoded once.
    raw.socket.send(requestOf(codec, 1, 3));
    expect((await raw.next()).value).toEqual({ jsonrpc: '2.0', id: 3, result: 1 });
    expect(decode).toHaveBeenCalledTimes(1);
  });
});
