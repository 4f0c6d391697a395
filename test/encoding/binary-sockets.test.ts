/**
 * MessagePack and CBOR over real sockets: negotiated by subprotocol, the same calls, batches,
 * subscriptions and server-to-client calls as JSON; bad binary input answered precisely with
 * the connection kept; frames of the wrong type closed 1003.
 */
import { firstValueFrom } from 'rxjs';
import { filter, take, toArray } from 'rxjs/operators';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { createGateway } from '../../src/server/gateway.js';
import { silentLogger } from '../../src/peer/logger.js';
import { Resources } from '../support/resources.js';
import { closeOf } from '../support/sockets.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

const ALL = ['json', 'msgpack', 'cbor'] as const;

async function binaryGateway(options: Parameters<Resources['gateway']>[0] = {}) {
  const running = await resources.gateway({ encodings: [...ALL], ...options });
  running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  running.gateway.method('echo', (params) => params);
  running.gateway.topic('news');
  return running;
}

/** A raw `ws` socket offering `protocols`, every message decoded with `codec` (or as JSON text). */
function rawSocket(url: string, protocols: string[], codec?: WireCodec) {
  return rawBinarySocket(resources, url, protocols, codec?.decode);
}

describe.each([msgpack, cbor])('$name', (codec) => {
  it('negotiates its subprotocol and answers calls in binary frames', async () => {
    const { url } = await binaryGateway();
    const raw = await rawSocket(url, [codec.subprotocol, 'jsonrpc-2.0'], codec);
    expect(raw.socket.protocol).toBe(codec.subprotocol);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 'a', method: 'sum', params: [1, 2.5] }));
    expect(await raw.next()).toMatchObject({
      binary: true,
      value: { jsonrpc: '2.0', id: 'a', result: 3.5 },
    });
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 41, method: 'echo', params: { s: 'é' } }));
    expect((await raw.next()).value).toEqual({ jsonrpc: '2.0', id: 41, result: { s: 'é' } });
  });

  it('client: calls, batches, subscriptions and server-to-client calls', async () => {
    const { url, gateway } = await binaryGateway();
    const sessionOpened = firstValueFrom(gateway.connected$);
    const client = resources.client(url, { encoding: codec });
    client.method('client.add', (params) => (params as number[])[0]! + (params as number[])[1]!);
    await client.opened();
    expect(await client.call('sum', [1, 2, 3])).toBe(6);
    expect(
      await client.batch([
        { method: 'sum', params: [1, 1] },
        { method: 'echo', params: { nested: [[{ deep: true }]] } },
        { method: 'missing' },
      ]),
    ).toEqual([
      { status: 'fulfilled', value: 2 },
      { status: 'fulfilled', value: { nested: [[{ deep: true }]] } },
      expect.objectContaining({ status: 'rejected' }),
    ]);
    const news = firstValueFrom(client.subscribe('news').pipe(take(2), toArray()));
    await client.call('echo', []); // the subscribe went before this call's answer
    await within(
      (async () => {
        while ((await gateway.publish('news', { n: 1 })) === 0) {
          await new Promise((r) => setTimeout(r, 10));
        }
      })(),
      'the subscription is active',
    );
    await gateway.publish('news', { n: 2 });
    expect(await within(news, 'two messages')).toEqual([{ n: 1 }, { n: 2 }]);
    const session = await sessionOpened;
    expect(await session.call('client.add', [20, 22])).toBe(42);
  });

  it('answers bad binary input precisely and keeps the connection', async () => {
    const { url } = await binaryGateway({ limits: { maxDepth: 8, maxBatch: 2 } });
    const raw = await rawSocket(url, [codec.subprotocol], codec);
    const valid = codec.encode({ jsonrpc: '2.0', id: 1, method: 'sum', params: [1] });
    raw.socket.send(valid.subarray(0, valid.length - 3)); // truncated
    expect((await raw.next()).value).toMatchObject({ id: null, error: { code: -32700 } });
    const deep = codec.encode({
      jsonrpc: '2.0',
      id: 2,
      method: 'echo',
      params: [[[[[[[[[]]]]]]]]],
    });
    raw.socket.send(deep);
    expect((await raw.next()).value).toMatchObject({
      id: null,
      error: { code: -32600, data: { maxDepth: 8 } },
    });
    const batch = [1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'sum', params: [id] }));
    raw.socket.send(codec.encode(batch));
    // The gateway's answer to a batch over maxBatch, as in JSON.
    expect((await raw.next()).value).toMatchObject({
      id: null,
      error: { code: -32002, data: { maxBatch: 2 } },
    });
    // A huge declared length in a few bytes; a tag bomb (CBOR) or an ext type (MessagePack).
    const bombs =
      codec === msgpack
        ? [
            [0xdd, 0xff, 0xff, 0xff, 0xff],
            [0xc7, 0x01, 0x72, 0x00],
          ]
        : [[0x9b, 0, 0, 0, 1, 0, 0, 0, 0, 0], new Array<number>(100_000).fill(0xc6).concat(0)];
    for (const bomb of bombs) {
      raw.socket.send(new Uint8Array(bomb));
      expect((await raw.next()).value).toMatchObject({ id: null, error: { code: -32700 } });
    }
    // NaN and the infinities have no JSON counterpart: as an id, JSON.stringify made null of them
    // and the call ran, answered under an id its client never sent.
    for (const id of [NaN, Infinity, -Infinity]) {
      raw.socket.send(codec.encode({ jsonrpc: '2.0', id, method: 'sum', params: [1] }));
      expect((await raw.next()).value).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32700, message: 'Parse error' },
      });
    }
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 3, method: 'sum', params: [NaN, 1] }));
    expect((await raw.next()).value).toMatchObject({ id: null, error: { code: -32700 } });
    raw.socket.send(valid);
    expect((await raw.next()).value).toEqual({ jsonrpc: '2.0', id: 1, result: 1 });
  });

  it('closes 1003 on a text frame, and 1009 on a frame over maxMessageBytes', async () => {
    const { url } = await binaryGateway({ limits: { maxMessageBytes: 1_000 } });
    const text = await rawSocket(url, [codec.subprotocol], codec);
    text.socket.send('{"jsonrpc":"2.0","id":1,"method":"sum","params":[1]}');
    expect(await closeOf(text.socket)).toEqual({
      code: 1003,
      reason: `text frame on a ${codec.name} connection`,
    });
    const big = await rawSocket(url, [codec.subprotocol], codec);
    big.socket.send(
      codec.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params: ['x'.repeat(2_000)] }),
    );
    expect((await closeOf(big.socket)).code).toBe(1009);
  });
});

describe('JSON beside the binary encodings', () => {
  it('one broadcast reaches JSON, MessagePack and CBOR subscribers of a topic alike', async () => {
    const { url, gateway } = await binaryGateway();
    const clients = [undefined, msgpack, cbor].map((codec) =>
      resources.client(url, codec ? { encoding: codec } : {}),
    );
    const received = clients.map((client) => firstValueFrom(client.subscribe('news')));
    await Promise.all(clients.map((client) => client.call('echo', [])));
    await within(
      (async () => {
        while ((await gateway.publish('news', { all: 'three', n: [1.5, null] })) < 3) {
          await new Promise((r) => setTimeout(r, 10));
        }
      })(),
      'three subscriptions',
    );
    for (const message of await Promise.all(received)) {
      expect(message).toEqual({ all: 'three', n: [1.5, null] });
    }
  });

  it('a broadcast is encoded once per encoding, not once per subscriber', async () => {
    const { url, gateway } = await binaryGateway();
    const clients = [1, 2, 3].map(() => resources.client(url, { encoding: msgpack }));
    const received = clients.map((client) =>
      firstValueFrom(client.subscribe('news').pipe(filter((m) => m !== 'warm-up'))),
    );
    await Promise.all(clients.map((client) => client.call('echo', [])));
    // Every subscription is active once a publish reaches three.
    await within(
      (async () => {
        while ((await gateway.publish('news', 'warm-up')) < 3) {
          await new Promise((r) => setTimeout(r, 10));
        }
      })(),
      'three subscriptions',
    );
    const encode = msgpack.encode;
    let encoded = 0;
    // The codec object is shared with the clients here: only the broadcast frames count.
    (msgpack as { encode: WireCodec['encode'] }).encode = (value) => {
      if ((value as { method?: string }).method === 'subscription') encoded++;
      return encode(value);
    };
    try {
      await gateway.publish('news', { once: true });
      for (const message of await within(Promise.all(received), 'the broadcast')) {
        expect(message).toEqual({ once: true });
      }
    } finally {
      (msgpack as { encode: WireCodec['encode'] }).encode = encode;
    }
    expect(encoded).toBe(1);
  });

  it("the client prefers its codec; the gateway its client's first choice among those on", async () => {
    const { url } = await binaryGateway({ encodings: ['json', 'cbor'] });
    const raw = await rawSocket(
      url,
      ['jsonrpc-2.0+msgpack', 'jsonrpc-2.0+cbor', 'jsonrpc-2.0'],
      cbor,
    );
    expect(raw.socket.protocol).toBe('jsonrpc-2.0+cbor');
    const json = await rawSocket(url, ['jsonrpc-2.0', 'jsonrpc-2.0+cbor']);
    expect(json.socket.protocol).toBe('jsonrpc-2.0');
  });

  it('a client asking for MessagePack from a JSON-only gateway works in JSON', async () => {
    const running = await resources.gateway();
    running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
    const client = resources.client(running.url, { encoding: msgpack });
    expect(await client.call('sum', [2, 3])).toBe(5);
  });

  it('with binary encodings on, a binary frame on a JSON connection closes 1003', async () => {
    const { url } = await binaryGateway();
    const raw = await rawSocket(url, ['jsonrpc-2.0']);
    raw.socket.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"sum","params":[1]}'));
    expect(await closeOf(raw.socket)).toEqual({
      code: 1003,
      reason: 'binary frame on a JSON connection',
    });
  });

  it('on a JSON-only gateway too, a binary frame closes 1003 by default', async () => {
    const running = await resources.gateway();
    running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
    for (const protocols of [['jsonrpc-2.0'], []]) {
      const raw = await rawSocket(running.url, protocols);
      raw.socket.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"sum","params":[1]}'));
      expect(await closeOf(raw.socket)).toEqual({
        code: 1003,
        reason: 'binary frame on a JSON connection',
      });
      expect(raw.inbox).toEqual([]);
    }
  });

  it("with binaryJsonFrames: 'text', a binary frame on a JSON connection is read as UTF-8 JSON text", async () => {
    for (const encodings of [['json'], [...ALL]] as const) {
      const running = await resources.gateway({
        encodings: [...encodings],
        binaryJsonFrames: 'text',
      });
      running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
      const raw = await rawSocket(running.url, ['jsonrpc-2.0']);
      raw.socket.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"sum","params":[1]}'));
      expect(await raw.next()).toMatchObject({
        binary: false,
        value: { jsonrpc: '2.0', id: 1, result: 1 },
      });
      // A MessagePack connection on the same gateway still takes binary frames as MessagePack.
      if (encodings.length > 1) {
        const packed = await rawSocket(running.url, [msgpack.subprotocol], msgpack);
        packed.socket.send(msgpack.encode({ jsonrpc: '2.0', id: 2, method: 'sum', params: [2] }));
        expect((await packed.next()).value).toEqual({ jsonrpc: '2.0', id: 2, result: 2 });
      }
    }
  });

  it('refuses an unknown encoding by name', () => {
    expect(() =>
      createGateway({ logger: silentLogger, encodings: ['json', 'xml' as 'json'] }),
    ).toThrow(/encodings.*"json", "msgpack", "cbor"/);
  });
});
