/**
 * Ids beyond 2^53 over MessagePack and CBOR, with raw msgpackr and cbor-x clients that read
 * every 64-bit integer as a BigInt: a request's int64/uint64 id (CBOR: an 8-byte argument)
 * comes back as the same 64-bit integer, in results, errors and batches; other integers beyond
 * 2^53 reach handlers as the nearest double, as they would in JSON text.
 */
import { Decoder, Encoder } from 'cbor-x';
import fc from 'fast-check';
import { Packr, Unpackr } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import { Resources } from '../support/resources.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
let url = '';

beforeAll(async () => {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
  running.gateway.method('echo', (params) => params);
  running.gateway.method('fail', () => {
    throw new InvalidParamsError('always');
  });
  // What a handler sees of each param: its type and value as JSON would give them.
  running.gateway.method('types', (params) => (params as unknown[]).map((p) => [typeof p, p]));
  url = running.url;
});
afterAll(() => resources.cleanup());

const MAX_UINT64 = 2n ** 64n - 1n;

/** A raw client of one encoding: its own encoder and a decoder that reads 64-bit integers as BigInts. */
interface RawCodec {
  codec: WireCodec;
  encode: (value: unknown) => Uint8Array;
  decode: (bytes: Uint8Array) => unknown;
  /** The most negative id the encoding writes as a plain integer. */
  minId: bigint;
}

const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
const cborEncoder = new Encoder({ useRecords: false, mapsAsObjects: true, pack: false });
const cborDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });

const rawCodecs: RawCodec[] = [
  {
    codec: msgpack,
    encode: (value) => packr.pack(value),
    decode: (bytes) => unpackr.unpack(bytes) as unknown,
    minId: -(2n ** 63n),
  },
  {
    codec: cbor,
    encode: (value) => cborEncoder.encode(value),
    decode: (bytes) => cborDecoder.decode(bytes) as unknown,
    // -2^64 itself: cbor-x writes it as a bignum tag, which no check here takes.
    minId: -(2n ** 64n) + 1n,
  },
];

describe.each(rawCodecs)('$codec.name', (raw) => {
  async function connect() {
    return rawBinarySocket(resources, url, [raw.codec.subprotocol], raw.decode);
  }

  /** Send one value, and the reply: decoded, and checked as the gateway's own check reads it. */
  async function exchange(
    socket: Awaited<ReturnType<typeof connect>>,
    value: unknown,
  ): Promise<unknown> {
    socket.socket.send(raw.encode(value));
    const reply = await socket.next();
    expect(reply.binary).toBe(true);
    // No bignum tag and no extension: the reply is plain 64-bit integers.
    expect(raw.codec.check(reply.bytes, 64)).toBe('ok');
    return reply.value;
  }

  const ids = [2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), MAX_UINT64, raw.minId];

  it('echoes 2^53 + 1, 2^63 - 1, -2^63, 2^64 - 1 and its most negative id as the same 64-bit integers', async () => {
    const socket = await connect();
    for (const id of ids) {
      expect(await exchange(socket, { jsonrpc: '2.0', id, method: 'echo', params: ['x'] })).toEqual(
        { jsonrpc: '2.0', id, result: ['x'] },
      );
      expect(await exchange(socket, { jsonrpc: '2.0', id, method: 'fail', params: [] })).toEqual({
        jsonrpc: '2.0',
        id,
        error: expect.objectContaining({ code: -32602 }) as unknown,
      });
    }
    const batch = ids.map((id) => ({ jsonrpc: '2.0', id, method: 'echo', params: [] }));
    const replies = (await exchange(socket, batch)) as { id: unknown }[];
    expect(replies.map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it('other integers beyond 2^53 reach handlers and results as the nearest double', async () => {
    const socket = await connect();
    const params = [2n ** 63n - 1n, -(2n ** 63n), MAX_UINT64, 7n];
    expect(await exchange(socket, { jsonrpc: '2.0', id: 1, method: 'types', params })).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: params.map((p) => ['number', Number(p)]),
    });
    expect(await exchange(socket, { jsonrpc: '2.0', id: 2, method: 'echo', params })).toEqual({
      jsonrpc: '2.0',
      id: 2,
      result: params.map(Number),
    });
  });

  it('a float id comes back as the number it holds: 2.5 as a float, 2.0 and -0 as integers', async () => {
    const socket = await connect();
    // A request whose id is the 64-bit float `id`, written by hand: both encoders write a whole
    // float (and -0) as an integer.
    const floatRequest = (id: number): Uint8Array => {
      const float = new Uint8Array(9);
      float[0] = raw.codec.name === 'msgpack' ? 0xcb : 0xfb;
      new DataView(float.buffer).setFloat64(1, id);
      const members = ['jsonrpc', '2.0', 'method', 'echo', 'params', [], 'id'].flatMap((item) => [
        ...raw.encode(item),
      ]);
      // A map of 4 members: fixmap in MessagePack, major type 5 in CBOR.
      return new Uint8Array([raw.codec.name === 'msgpack' ? 0x84 : 0xa4, ...members, ...float]);
    };
    for (const [sent, echoed, bytes] of [
      [2.5, 2.5, raw.encode(2.5)],
      [2, 2, [2]],
      [-0, 0, [0]],
    ] as const) {
      socket.socket.send(floatRequest(sent));
      const reply = await socket.next();
      expect(reply.value).toEqual({ jsonrpc: '2.0', id: echoed, result: [] });
      expect(Object.is((reply.value as { id: number }).id, echoed)).toBe(true);
      // The id is the reply's last member, in the bytes named.
      expect([...reply.bytes.subarray(reply.bytes.length - [...bytes].length)]).toEqual([...bytes]);
    }
  });

  it('property: any safe integer, 64-bit integer or string id comes back equal', async () => {
    const socket = await connect();
    const id = fc.oneof(
      fc.maxSafeInteger(),
      fc.bigInt({ min: 2n ** 53n, max: MAX_UINT64 }),
      fc.bigInt({ min: raw.minId, max: -(2n ** 53n) }),
      fc.string({ unit: 'binary', maxLength: 24 }),
    );
    await fc.assert(
      fc.asyncProperty(id, fc.constantFrom('echo', 'fail'), async (sent, method) => {
        const reply = (await exchange(socket, {
          jsonrpc: '2.0',
          id: sent,
          method,
          params: [],
        })) as { id: unknown };
        expect(reply.id).toEqual(sent);
      }),
      { numRuns: 300 },
    );
  });
});
