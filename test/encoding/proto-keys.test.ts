/**
 * A `__proto__` key reaches a handler over MessagePack and CBOR exactly as over JSON: stripped
 * (msgpackr and cbor-x would rename it `__proto_`, a key the client never sent).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** JSON text of values whose maps draw their keys from the spellings that matter. */
const jsonText = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('1', '"__proto__"', 'null', '"x"'),
    fc.array(tie('value'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
    fc
      .array(
        fc.tuple(
          fc.constantFrom('__proto__', '__proto_', 'constructor', 'prototype', 'a', 'b'),
          tie('value'),
        ),
        { maxLength: 4 },
      )
      .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
  ),
})).value;

/** A gateway whose `see` handler answers the params it was given, as JSON text. */
async function recordingGateway() {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
  running.gateway.method('see', (params) => JSON.stringify(params));
  return running;
}

describe('__proto__ keys', () => {
  it.each([msgpack, cbor])('are stripped over $name as over JSON', async (codec: WireCodec) => {
    const { url } = await recordingGateway();
    const json = await rawBinarySocket(resources, url, ['jsonrpc-2.0']);
    const binary = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    let id = 0;
    await fc.assert(
      fc.asyncProperty(jsonText, async (text) => {
        const params = `{"p":${text}}`;
        id++;
        json.socket.send(`{"jsonrpc":"2.0","id":${id},"method":"see","params":${params}}`);
        // JSON.parse makes `__proto__` an own key, which the encoder writes as any other.
        const value: unknown = JSON.parse(params);
        binary.socket.send(codec.encode({ jsonrpc: '2.0', id, method: 'see', params: value }));
        const [viaJson, viaBinary] = [
          (await within(json.next(), 'the JSON answer')).value,
          (await within(binary.next(), 'the binary answer')).value,
        ];
        expect(viaBinary).toEqual(viaJson);
        expect(viaBinary).toMatchObject({ id, result: expect.any(String) });
      }),
      { numRuns: 150 },
    );
  });

  it.each([msgpack, cbor])(
    "leave the caller's bytes as they were in $name's toText, a Buffer's included",
    (codec: WireCodec) => {
      const params = JSON.parse('{"__proto__":{"x":1},"a":2}') as unknown;
      const encoded = codec.encode({ jsonrpc: '2.0', id: 1, method: 'm', params });
      for (const bytes of [Buffer.from(encoded), new Uint8Array(encoded)]) {
        const before = Buffer.from(bytes);
        const text = codec.toText(bytes, 64);
        expect(text).toBe(
          '{"jsonrpc":"2.0","id":1,"method":"m","params":{"__proto__":{"x":1},"a":2}}',
        );
        expect(Buffer.from(bytes).equals(before)).toBe(true);
        // Read again, the same bytes give the same text.
        expect(codec.toText(bytes, 64)).toBe(text);
      }
    },
  );

  it('leave a key __proto_ the client sent as it is', async () => {
    const { url } = await recordingGateway();
    const raw = await rawBinarySocket(resources, url, [msgpack.subprotocol], msgpack.decode);
    const params = JSON.parse('{"__proto_":1,"__proto__":{"isAdmin":true},"a":"__proto__"}');
    raw.socket.send(msgpack.encode({ jsonrpc: '2.0', id: 1, method: 'see', params }));
    expect((await within(raw.next(), 'the answer')).value).toMatchObject({
      result: '{"__proto_":1,"a":"__proto__"}',
    });
  });
});
