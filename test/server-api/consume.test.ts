/**
 * The broker-consumed form of the server API: a publish written as an entry of a Redis stream
 * (taken by the consumer group, acknowledged after handling, a malformed entry acknowledged
 * too), and one sent as a NATS request (the JSON-RPC reply on its reply subject).
 */
import { randomBytes } from 'node:crypto';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { take } from 'rxjs/operators';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { NATS_URL, REDIS_URL } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitFor, within } from '../support/waiting.js';
import { call, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const apis: ServerApi[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => undefined);
});

async function subscribedGateway(consume: Record<string, unknown>) {
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  const api = await startApi(running.gateway, { consume });
  apis.push(api);
  const client = res.client(running.url);
  const received = firstValueFrom(client.subscribeWithMeta('news').pipe(take(1)));
  await waitFor(
    async () =>
      (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 1,
    'the subscription',
  );
  return { received };
}

const publish = (data: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'publish', params: { topic: 'news', data } });

describe.skipIf(!redisUp && !mustRun)('server API consumed from a Redis stream', () => {
  it('publishes each entry of the stream and acknowledges it, a malformed one too', async () => {
    const stream = `wsrpcapi:${randomBytes(5).toString('hex')}`;
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => {
      await redis.del(stream);
      redis.disconnect();
    });
    const { received } = await subscribedGateway({ redisStream: stream, url: REDIS_URL });
    await redis.xadd(stream, '*', 'other', 'field');
    await redis.xadd(stream, '*', 'request', 'not json');
    await redis.xadd(stream, '*', 'request', publish({ from: 'redis' }));
    const event = await within(received, 'the consumed publish');
    expect(event).toMatchObject({ seq: 1, data: { from: 'redis' } });
    await waitFor(async () => {
      const pending = (await redis.xpending(stream, 'wsrpc-gateway')) as [number, ...unknown[]];
      return pending[0] === 0;
    }, 'every entry acknowledged');
  });
});

describe.skipIf(!natsUp && !mustRun)('server API consumed from a NATS subject', () => {
  it('answers a request on its reply subject', async () => {
    const subject = `wsrpcapi.${randomBytes(5).toString('hex')}`;
    const nc = await connectNats({ servers: NATS_URL });
    cleanups.push(() => nc.close());
    const { received } = await subscribedGateway({ natsSubject: subject, url: NATS_URL });
    const reply = await nc.request(subject, publish({ from: 'nats' }), { timeout: 5_000 });
    expect(JSON.parse(reply.string())).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: { seq: 1, duplicate: false },
    });
    expect(await within(received, 'the consumed publish')).toMatchObject({
      seq: 1,
      data: { from: 'nats' },
    });
    const refused = await nc.request(
      subject,
      '{"jsonrpc":"2.0","id":8,"method":"publish","params":{}}',
      {
        timeout: 5_000,
      },
    );
    expect(JSON.parse(refused.string())).toMatchObject({
      id: 8,
      error: { code: -32602, data: { field: 'topic' } },
    });
  });
});
