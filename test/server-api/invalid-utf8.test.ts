/**
 * A server API request that is not valid UTF-8 (an HTTP body, a NATS message) is not JSON text:
 * it is answered -32700 Parse error (id null, `data.reason` "invalid UTF-8"; HTTP 200), never
 * decoded with U+FFFD in place of the bad bytes and handled as the request that decoding makes
 * (a bad byte in a topic name would publish to a topic the backend never named). A Redis stream
 * entry whose request is not UTF-8 is acknowledged and not handled (nobody reads its answer).
 */
import { randomBytes } from 'node:crypto';
import { connect as connectNats } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { take } from 'rxjs/operators';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { NATS_URL, REDIS_URL } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitFor, within } from '../support/waiting.js';
import { API_KEY, call, startApi, userOptions } from './support.js';

const INVALID_UTF8 =
  '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":{"reason":"invalid UTF-8"}},"id":null}';

const mustRun = process.env['CI'] === 'true';
const natsUp = await canConnect(4222);
const redisUp = await canConnect(6379);
const res = new Resources();
const apis: ServerApi[] = [];
afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => Buffer.from(part)));

/** A publish to `topic` with id 1, bytes `bad` in the middle of the topic's name. */
const badPublish = (bad: number[]): Buffer =>
  bytes('{"jsonrpc":"2.0","id":1,"method":"publish","params":{"topic":"ne', bad, 'ws","data":1}}');

async function postBytes(url: string, body: Uint8Array): Promise<{ status: number; body: string }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: new Uint8Array(body),
  });
  return { status: response.status, body: await response.text() };
}

const strict = new TextDecoder('utf-8', { fatal: true });
function isUtf8(data: Uint8Array): boolean {
  try {
    strict.decode(data);
    return true;
  } catch {
    return false;
  }
}

/** Arbitrary bytes, JSON texts, and server API requests with a byte of 0x80 and up put in. */
const requestBytes = fc.oneof(
  fc.uint8Array({ maxLength: 32 }),
  fc.json().map((text) => Buffer.from(text)),
  fc
    .tuple(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.nat(),
      fc.integer({ min: 0x80, max: 0xff }),
    )
    .map(([text, at, byte]) => {
      const request = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'subscribers',
        params: { topic: text },
      });
      const out = Buffer.from(request);
      const index = at % (out.length + 1);
      return Buffer.concat([out.subarray(0, index), Buffer.from([byte]), out.subarray(index)]);
    }),
);

const BAD_SEQUENCES: [string, number[]][] = [
  ['a lone continuation byte', [0x80]],
  ['0xff', [0xff]],
  ['an overlong "/"', [0xc0, 0xaf]],
  ['an encoded surrogate', [0xed, 0xa0, 0x80]],
  ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ['a sequence cut short', [0xe2, 0x82]],
];

describe('server API over HTTP: a body that is not valid UTF-8', () => {
  it.each(BAD_SEQUENCES)('%s in a topic name is -32700, nothing published', async (_name, bad) => {
    const running = await res.gateway();
    running.gateway.topic('news');
    const api = await startApi(running.gateway);
    apis.push(api);
    expect(await postBytes(api.url, badPublish(bad))).toEqual({ status: 200, body: INVALID_UTF8 });
    // Still answering, and the topic the decoding would have named saw nothing.
    expect(await call(api.url, 'publish', { topic: 'news', data: 2 })).toMatchObject({ seq: 1 });
  });

  describe('the answer is the refusal exactly when the body is not UTF-8', () => {
    const own = new Resources();
    let api: ServerApi & { url: string };
    beforeAll(async () => {
      const running = await own.gateway();
      api = await startApi(running.gateway);
    });
    afterAll(async () => {
      await api.close();
      await own.cleanup();
    });

    it('for any byte string', async () => {
      await fc.assert(
        fc.asyncProperty(requestBytes, async (sent) => {
          const answer = await postBytes(api.url, sent);
          expect(answer.body === INVALID_UTF8).toBe(!isUtf8(sent));
          if (!isUtf8(sent)) expect(answer.status).toBe(200);
        }),
        { numRuns: 200 },
      );
    });
  });
});

describe.skipIf(!natsUp && !mustRun)(
  'server API consumed from NATS: a message not valid UTF-8',
  () => {
    const nats: NatsConnection[] = [];
    afterEach(async () => {
      await Promise.all(nats.splice(0).map((nc) => nc.close()));
    });

    async function natsApi() {
      const subject = `wsrpcapi.${randomBytes(5).toString('hex')}`;
      const nc = await connectNats({ servers: NATS_URL });
      nats.push(nc);
      const running = await res.gateway();
      running.gateway.topic('news');
      const api = await startApi(running.gateway, {
        consume: { natsSubject: subject, url: NATS_URL },
      });
      apis.push(api);
      const request = async (body: Uint8Array): Promise<string> =>
        (await nc.request(subject, body, { timeout: 5_000 })).string();
      return { api, request };
    }

    it.each(BAD_SEQUENCES)(
      '%s in a topic name is -32700, nothing published',
      async (_name, bad) => {
        const { api, request } = await natsApi();
        expect(await request(badPublish(bad))).toBe(INVALID_UTF8);
        expect(await call(api.url, 'publish', { topic: 'news', data: 2 })).toMatchObject({
          seq: 1,
        });
      },
    );

    it('the answer is the refusal exactly when the message is not UTF-8, for any byte string', async () => {
      const { request } = await natsApi();
      await fc.assert(
        fc.asyncProperty(requestBytes, async (sent) => {
          const answer = await request(sent);
          expect(answer === INVALID_UTF8).toBe(!isUtf8(sent));
        }),
        { numRuns: 200 },
      );
    });
  },
);

describe.skipIf(!redisUp && !mustRun)(
  'server API consumed from Redis: an entry not valid UTF-8',
  () => {
    it('is acknowledged and not handled, not published with U+FFFD in its data', async () => {
      const stream = `wsrpcapi:${randomBytes(5).toString('hex')}`;
      const redis = new Redis(REDIS_URL);
      try {
        const running = await res.gateway(userOptions());
        running.gateway.topic('news');
        const api = await startApi(running.gateway, {
          consume: { redisStream: stream, url: REDIS_URL },
        });
        apis.push(api);
        const client = res.client(running.url);
        const received = firstValueFrom(client.subscribeWithMeta('news').pipe(take(1)));
        await waitFor(
          async () =>
            (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 1,
          'the subscription',
        );
        const publish = (data: (string | number[])[]): Buffer =>
          bytes(
            '{"jsonrpc":"2.0","id":1,"method":"publish","params":{"topic":"news","data":"',
            ...data,
            '"}}',
          );
        await redis.xadd(stream, '*', 'request', publish(['a', [0xff]]));
        await redis.xadd(stream, '*', 'request', publish(['b']));
        // The first event the topic sees is the second entry's, as its first.
        expect(await within(received, 'the consumed publish')).toMatchObject({ seq: 1, data: 'b' });
        await waitFor(async () => {
          const pending = (await redis.xpending(stream, 'wsrpc-gateway')) as [number, ...unknown[]];
          return pending[0] === 0;
        }, 'both entries acknowledged');
      } finally {
        await redis.del(stream);
        redis.disconnect();
      }
    });
  },
);
