/**
 * Values nested deeper than MessagePack and CBOR encode safely (msgpackr and cbor-x recurse):
 * refused where they enter (gateway.publish, limits.maxDepth), and an outgoing message the codec
 * cannot encode answered or closed precisely on that one connection, never the process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { MAX_ENCODED_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import { RedisBroker } from '../../src/redis.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { Resources } from '../support/resources.js';
import { closeOf } from '../support/sockets.js';
import { within } from '../support/waiting.js';
import { rawBinarySocket } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** `0` inside `levels` arrays. */
function nested(levels: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

async function binaryGateway(options: Parameters<Resources['gateway']>[0] = {}) {
  const running = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'], ...options });
  running.gateway.method('echo', (params) => params);
  running.gateway.method('deep', () => nested(3_000));
  running.gateway.topic('news');
  return running;
}

describe('the bound on depth', () => {
  it('limits.maxDepth may not pass MAX_ENCODED_DEPTH', async () => {
    await expect(
      resources.gateway({ limits: { maxDepth: MAX_ENCODED_DEPTH + 1 } }),
    ).rejects.toThrow(RangeError);
    await expect(
      resources.gateway({ limits: { maxDepth: MAX_ENCODED_DEPTH } }),
    ).resolves.toBeDefined();
  });

  it('gateway.publish refuses data deeper than MAX_ENCODED_DEPTH with a RangeError', async () => {
    const { gateway } = await binaryGateway();
    await expect(gateway.publish('news', nested(MAX_ENCODED_DEPTH + 1))).rejects.toThrow(
      RangeError,
    );
    await expect(gateway.publish('news', nested(MAX_ENCODED_DEPTH))).resolves.toBeTypeOf('number');
  });
});

describe.each([msgpack, cbor])('$name', (codec: WireCodec) => {
  it('a handler result too deep to encode is answered -32603 with a reason', async () => {
    const { url } = await binaryGateway();
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'deep' }));
    const reply = (await within(raw.next(), 'the answer')).value as {
      error: { code: number; data: { reason: string } };
    };
    expect(reply).toMatchObject({ id: 1, error: { code: ErrorCode.InternalError } });
    expect(reply.error.data.reason).toMatch(/nests deeper than/);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 2, method: 'echo', params: [7] }));
    expect((await within(raw.next(), 'the next answer')).value).toEqual({
      jsonrpc: '2.0',
      id: 2,
      result: [7],
    });
  });

  it('an echo of a frame within limits.maxDepth at its cap is answered', async () => {
    const { url } = await binaryGateway({ limits: { maxDepth: MAX_ENCODED_DEPTH } });
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    const params = nested(MAX_ENCODED_DEPTH - 1);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params }));
    expect((await within(raw.next(), 'the answer')).value).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: params,
    });
  });

  it('a server-to-client notification too deep to encode closes that connection 1011', async () => {
    const { url, gateway } = await binaryGateway();
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    const closed = closeOf(raw.socket);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params: [] }));
    await within(raw.next(), 'the answer');
    const [session] = gateway.sessions.values();
    // Past session.notify's own check: the codec's last resort on the way out.
    session!.peer.notify('deep', nested(3_000) as unknown[]);
    expect(await within(closed, 'the close')).toMatchObject({ code: 1011 });
  });

  it('a server-to-client call too deep to encode rejects -32603, the connection stays', async () => {
    const { url, gateway } = await binaryGateway();
    const raw = await rawBinarySocket(resources, url, [codec.subprotocol], codec.decode);
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'echo', params: [] }));
    await within(raw.next(), 'the answer');
    const [session] = gateway.sessions.values();
    const settled = await within(
      session!.call('deep', nested(3_000) as unknown[]).then(
        () => 'resolved',
        (err: unknown) => err,
      ),
      'the call settles',
    );
    expect(settled).toMatchObject({
      code: ErrorCode.InternalError,
      data: { reason: expect.stringMatching(/nests deeper/) },
    });
    raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 2, method: 'echo', params: [3] }));
    expect((await within(raw.next(), 'the next answer')).value).toMatchObject({ result: [3] });
  });

  it('the client: a call with params too deep to encode rejects -32603, the connection stays', async () => {
    const { url } = await binaryGateway();
    const client = resources.client(url, { encoding: codec });
    await client.opened();
    const settled = await within(
      client.call('echo', nested(3_000) as unknown[]).then(
        () => 'resolved',
        (err: unknown) => err,
      ),
      'the call settles',
    );
    expect(settled).toMatchObject({
      code: ErrorCode.InternalError,
      data: { reason: expect.stringMatching(/nests deeper/) },
    });
    // The process and the gateway are unharmed (more in test/client/binary-unencodable.test.ts).
    expect(await within(client.call('echo', [2]), 'the next call')).toEqual([2]);
  });
});

describe.each([
  ['memory', undefined],
  ['redis', 'redis'],
] as const)('publish with the %s broker', (_name, kind) => {
  it('data too deep is refused, every subscriber keeps every message', async () => {
    const prefix = `deepvalues${process.pid}${Date.now()}`;
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
        : undefined;
    try {
      const { url, gateway } = await binaryGateway(broker ? { broker } : {});
      const socket = await rawBinarySocket(resources, url, [msgpack.subprotocol], msgpack.decode);
      socket.socket.send(
        msgpack.encode({ jsonrpc: '2.0', id: 1, method: 'subscribe', params: ['news'] }),
      );
      await within(socket.next(), 'subscribed');
      await gateway.publish('news', { n: 1 });
      await expect(gateway.publish('news', nested(2_000))).rejects.toThrow(RangeError);
      await gateway.publish('news', { n: 3 });
      const seen = [];
      for (let i = 0; i < 2; i++) {
        const { value } = await within(socket.next(), 'a message');
        seen.push((value as { params: { seq: number; result: unknown } }).params);
      }
      expect(seen).toMatchObject([
        { seq: 1, result: { n: 1 } },
        { seq: 2, result: { n: 3 } },
      ]);
    } finally {
      await resources.cleanup();
      if (broker) {
        await broker.close();
        await deleteRedisKeys(REDIS_URL, prefix);
      }
    }
  });
});
