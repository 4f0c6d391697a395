/**
 * A number beyond a double's range (`1e400`, a Python `10**400`) in JSON text the gateway passes
 * on as written: JSON.parse reads it as Infinity, which MessagePack and CBOR could carry only as
 * an infinite float, a number no JSON text holds and the codecs' own check refuses. It is refused
 * where it enters, for every encoding: a routed call's result holding one is -32011 Upstream
 * unavailable; a broker payload holding one (written by another producer) goes to no subscriber,
 * each told of it as of a message lost. Past those checks, the binary encoders refuse it as they
 * refuse a lone surrogate: no frame the client must refuse is ever written.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { UnencodableMessageError } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { msgpack } from '../../src/msgpack.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { isSendablePayload } from '../../src/pubsub/sendable-payload.js';
import { Resources } from '../support/resources.js';
import { closeOf } from '../support/sockets.js';
import { within } from '../support/waiting.js';
import { startRoutedGateway } from '../upstream/routed-gateway.js';
import type { RoutedGateway } from '../upstream/routed-gateway.js';
import { rawBinarySocket } from './raw-binary-socket.js';
import type { RawArrival } from './raw-binary-socket.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

const beyondRange = expect.stringMatching(/beyond a double's range/) as unknown;

/** A run of 400 nines: an integer past 10^308 written without an exponent. */
const NINES = '9'.repeat(400);

/** Results holding a number beyond a double's range, by method. */
const INFINITE_RESULTS: Record<string, string> = {
  'up.huge': '{"big":1e400,"ok":1}',
  'up.negative': '[1,-1E+999]',
  'up.digits': `{"n":${NINES}}`,
};

/** A result near such numbers, holding none: passed on as before. */
const FINE_RESULT = `{"big":1e300,"tiny":1e-400,"text":"1e400","wide":${'1'.repeat(250)}e-100}`;
const FINE_VALUE = JSON.parse(FINE_RESULT) as unknown;

type Connection = { name: string; codec: WireCodec | undefined };
const CONNECTIONS: Connection[] = [
  { name: 'json', codec: undefined },
  { name: 'msgpack', codec: msgpack },
  { name: 'cbor', codec: cbor },
];

/** A raw socket speaking `codec` (JSON text without one), each frame checked as its client would. */
async function rawSocket(url: string, codec: WireCodec | undefined) {
  const raw = await rawBinarySocket(
    resources,
    url,
    [codec?.subprotocol ?? 'jsonrpc-2.0'],
    codec?.decode,
  );
  const send = (value: unknown): void =>
    raw.socket.send(codec ? codec.encode(value) : JSON.stringify(value));
  const next = async (what: string): Promise<RawArrival> => {
    const arrival = await within(raw.next(), what);
    expect(arrival.binary).toBe(codec !== undefined);
    if (codec) expect(codec.check(arrival.bytes, 64)).toBe('ok');
    return arrival;
  };
  return { ...raw, send, next };
}

describe('a routed result holding a number beyond a double’s range', () => {
  let upstream: Server;
  let running: RoutedGateway;

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const { id, method } = JSON.parse(Buffer.concat(chunks).toString()) as {
          id: number;
          method: string;
        };
        const result = INFINITE_RESULTS[method] ?? FINE_RESULT;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`{"jsonrpc":"2.0","id":${id},"result":${result}}`);
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    running = await startRoutedGateway(
      { upstreams: { up: { url: `http://127.0.0.1:${port}/rpc` } }, methods: { 'up.*': 'up' } },
      { encodings: ['json', 'msgpack', 'cbor'] },
    );
  });

  afterAll(async () => {
    await running?.close();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it.each(CONNECTIONS)(
    'is answered -32011 over $name; one holding none as before',
    async ({ codec }) => {
      const raw = await rawSocket(running.url, codec);
      let id = 0;
      for (const method of Object.keys(INFINITE_RESULTS)) {
        raw.send({ jsonrpc: '2.0', id: ++id, method, params: [] });
        expect((await raw.next(`the answer to ${method}`)).value).toEqual({
          jsonrpc: '2.0',
          id,
          error: {
            code: ErrorCode.UpstreamUnavailable,
            message: 'Upstream unavailable',
            data: { upstream: 'up', reason: beyondRange },
          },
        });
      }
      raw.send({ jsonrpc: '2.0', id: ++id, method: 'up.fine', params: [] });
      const fine = await raw.next('the answer to up.fine');
      expect(fine.value).toEqual({ jsonrpc: '2.0', id, result: FINE_VALUE });
      // A JSON client is sent the result as the upstream wrote it.
      if (!codec) expect(fine.bytes.toString()).toContain(`"result":${FINE_RESULT}`);
    },
  );

  it.each([msgpack, cbor])(
    'reaches the client of $name as the error, not a refused frame',
    async (codec) => {
      const client = resources.client(running.url, { encoding: codec, callTimeoutMs: 60_000 });
      await client.opened();
      const settled = await within(
        client.call('up.huge').then(
          (result: unknown) => ({ result }),
          (err: unknown) => err,
        ),
        'the call settles',
      );
      expect(settled).toMatchObject({
        code: ErrorCode.UpstreamUnavailable,
        data: { reason: beyondRange },
      });
      expect(await client.call('up.fine')).toEqual(FINE_VALUE);
    },
  );
});

/** The memory broker standing in for one other processes write to (Redis, NATS): not trusted. */
class SharedBroker extends MemoryBroker {
  override readonly trustedPayloads = false;
}

/** Raw subscribers of topic `feed`, one per connection kind, once subscribed. */
async function subscribers(url: string) {
  const subscribed = [];
  for (const { name, codec } of CONNECTIONS) {
    const raw = await rawSocket(url, codec);
    raw.send({ jsonrpc: '2.0', id: 1, method: 'subscribe', params: ['feed'] });
    const { value } = await raw.next('subscribed');
    subscribed.push({ name, codec, raw, subscription: (value as { result: string }).result });
  }
  return subscribed;
}

describe('a broker payload holding a number beyond a double’s range', () => {
  it('is no sendable payload; a string or a finite number near it is', () => {
    for (const payload of [
      '1e400',
      '{"x":-1e999}',
      '[1E+309]',
      '[1.5e0400]',
      NINES,
      `-${NINES}.5`,
    ]) {
      expect(isSendablePayload(payload), payload).toBe(false);
    }
    for (const payload of [
      '1e308',
      '1.7976931348623157e308',
      '1e-400',
      '"1e400"',
      `"${NINES}"`,
      `{"${NINES}":1}`,
      `${'1'.repeat(300)}e-100`,
      '{"a":[1,2.5,-3e10]}',
    ]) {
      expect(isSendablePayload(payload), payload).toBe(true);
    }
  });

  it('goes to no subscriber of any encoding; each is told of it as missed', async () => {
    const broker = new SharedBroker();
    const { gateway, url } = await resources.gateway({
      broker,
      encodings: ['json', 'msgpack', 'cbor'],
    });
    gateway.topic('feed');
    const subscribed = await subscribers(url);
    await broker.publish('feed', '{"n":1}');
    await broker.publish('feed', '{"n":2,"x":1e400}');
    await broker.publish('feed', '[-1e999]');
    await broker.publish('feed', `{"n":4,"d":${NINES}}`);
    await broker.publish('feed', '{"n":5,"fine":1e300,"s":"1e999"}');
    for (const { name, raw, subscription } of subscribed) {
      const seen = [];
      for (let i = 0; i < 2; i++) {
        seen.push(((await raw.next(`${name}: a message`)).value as { params: unknown }).params);
      }
      expect(seen, name).toEqual([
        { subscription, seq: 1, result: { n: 1 } },
        { subscription, seq: 5, missed: 3, result: { n: 5, fine: 1e300, s: '1e999' } },
      ]);
    }
  });

  it('past the entry checks (a trusted broker): closes a binary connection 1011, never sent', async () => {
    // The memory broker's payloads are trusted (only gateways publish to it): nothing checks
    // this one before the encoders do.
    const broker = new MemoryBroker();
    const { gateway, url } = await resources.gateway({
      broker,
      encodings: ['json', 'msgpack', 'cbor'],
    });
    gateway.topic('feed');
    const subscribed = await subscribers(url);
    const closes = subscribed.map(({ raw }) => closeOf(raw.socket));
    await broker.publish('feed', '{"x":1e400}');
    for (const [i, { name, codec, raw }] of subscribed.entries()) {
      if (!codec) {
        // JSON carries the text as it is.
        expect((await raw.next('the message')).bytes.toString()).toContain('"result":{"x":1e400}');
        continue;
      }
      const outcome = await within(
        Promise.race([closes[i]!, raw.next('a frame').then((arrival) => ({ arrival }))]),
        `${name}: the close`,
      );
      expect(outcome, name).toEqual({ code: 1011, reason: beyondRange });
    }
  });
});

describe.each([msgpack, cbor])('the $name codec, given such text', (codec) => {
  it('answers a response -32603 with a reason, and refuses a notification or a call', () => {
    const answer = codec.decode(codec.toBinary('{"jsonrpc":"2.0","id":3,"result":[1e400]}'));
    expect(answer).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: {
        code: ErrorCode.InternalError,
        message: 'Internal error',
        data: { reason: beyondRange },
      },
    });
    expect(() => codec.toBinary(`{"jsonrpc":"2.0","method":"m","params":[${NINES}]}`)).toThrow(
      UnencodableMessageError,
    );
    const call = '{"jsonrpc":"2.0","id":4,"method":"m","params":{"x":-1e999}}';
    const refused = (() => {
      try {
        codec.toBinary(call);
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(UnencodableMessageError);
    expect(JSON.parse((refused as UnencodableMessageError).answers!)).toMatchObject({
      id: 4,
      error: { code: ErrorCode.InternalError, data: { reason: beyondRange } },
    });
    // A batch: only the member holding one is answered so.
    const batch = codec.decode(
      codec.toBinary(
        '[{"jsonrpc":"2.0","id":5,"result":1e300},{"jsonrpc":"2.0","id":6,"result":1e400}]',
      ),
    );
    expect(batch).toEqual([
      { jsonrpc: '2.0', id: 5, result: 1e300 },
      expect.objectContaining({
        id: 6,
        error: expect.objectContaining({ code: ErrorCode.InternalError }),
      }),
    ]);
  });
});
