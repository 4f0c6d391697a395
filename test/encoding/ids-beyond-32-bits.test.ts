/**
 * Integer ids between 32 bits and 2^53 over MessagePack and CBOR, with raw msgpackr and cbor-x
 * clients that read every 64-bit integer as a BigInt (and a float as a number): an id sent as a
 * 64-bit integer comes back as that integer, in results, errors and batches, not as the float
 * msgpackr and cbor-x write for a number past 32 bits; ids within 32 bits stay as small as they
 * were.
 */
import { Decoder, Encoder } from 'cbor-x';
import { Packr, Unpackr } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
let url = '';

beforeAll(async () => {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
  running.gateway.method('echo', (params) => params);
  running.gateway.method('fail', () => {
    throw new InvalidParamsError('always');
  });
  url = running.url;
});
afterAll(() => resources.cleanup());

interface RawCodec {
  codec: WireCodec;
  encode: (value: unknown) => Uint8Array;
  decode: (bytes: Uint8Array) => unknown;
  /** The most negative integer the encoding's library writes as an integer from a number. */
  minNumberInteger: bigint;
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
    minNumberInteger: -(2n ** 31n),
  },
  {
    codec: cbor,
    encode: (value) => cborEncoder.encode(value),
    decode: (bytes) => cborDecoder.decode(bytes) as unknown,
    minNumberInteger: -(2n ** 32n),
  },
];

describe.each(rawCodecs)('$codec.name', (raw) => {
  /** 64-bit integer ids a double holds exactly, each past 32 bits. */
  const ids = [
    2n ** 32n,
    2n ** 40n,
    1_700_000_000_000n, // a millisecond timestamp, a common id
    2n ** 53n - 1n,
    raw.minNumberInteger - 1n,
    -(2n ** 40n),
    -(2n ** 53n) + 1n,
  ];

  async function exchange(
    socket: Awaited<ReturnType<typeof rawBinarySocket>>,
    value: unknown,
  ): Promise<unknown> {
    socket.socket.send(raw.encode(value));
    const reply = await within(socket.next(), 'the reply');
    expect(raw.codec.check(reply.bytes, 64)).toBe('ok');
    return reply.value;
  }

  it('an integer id past 32 bits comes back as that 64-bit integer, in results and errors', async () => {
    const socket = await rawBinarySocket(resources, url, [raw.codec.subprotocol], raw.decode);
    for (const id of ids) {
      // Written as a 64-bit integer: this decoder reads one as a BigInt, a float as a number.
      expect(await exchange(socket, { jsonrpc: '2.0', id, method: 'echo', params: [1] })).toEqual({
        jsonrpc: '2.0',
        id,
        result: [1],
      });
      expect(await exchange(socket, { jsonrpc: '2.0', id, method: 'fail', params: [] })).toEqual({
        jsonrpc: '2.0',
        id,
        error: expect.objectContaining({ code: -32602 }) as unknown,
      });
    }
  });

  it('a batch of such ids comes back with each as the same 64-bit integer', async () => {
    const socket = await rawBinarySocket(resources, url, [raw.codec.subprotocol], raw.decode);
    const batch = ids.map((id) => ({ jsonrpc: '2.0', id, method: 'echo', params: [] }));
    const replies = (await exchange(socket, batch)) as { id: unknown }[];
    expect(replies.map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it('an id sent as a whole float past 32 bits comes back as the integer it holds', async () => {
    const socket = await rawBinarySocket(resources, url, [raw.codec.subprotocol], raw.decode);
    // Both encoders write a number past 32 bits as a 64-bit float.
    const reply = await exchange(socket, {
      jsonrpc: '2.0',
      id: 2 ** 40,
      method: 'echo',
      params: [],
    });
    expect(reply).toEqual({ jsonrpc: '2.0', id: 2n ** 40n, result: [] });
  });

  it('ids within 32 bits stay the integers of their width', async () => {
    const socket = await rawBinarySocket(resources, url, [raw.codec.subprotocol], raw.decode);
    for (const id of [2 ** 32 - 1, Number(raw.minNumberInteger), 7, -7]) {
      socket.socket.send(raw.encode({ jsonrpc: '2.0', method: 'echo', params: [], id }));
      const reply = await within(socket.next(), 'the reply');
      expect(reply.value).toEqual({ jsonrpc: '2.0', id, result: [] });
      // The id is the reply's last member: as few bytes as the encoder writes for the number.
      const idBytes = raw.encode(id);
      expect([...reply.bytes.subarray(reply.bytes.length - idBytes.length)]).toEqual([...idBytes]);
    }
  });
});
