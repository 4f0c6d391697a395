/**
 * The broker-consumed form of the server API: a publish written as an entry of a Redis stream
 * (taken by the consumer group, acknowledged after handling, a malformed entry acknowledged
 * too), and one sent as a NATS request (the JSON-RPC reply on its reply subject). Then the
 * bound on requests handled at once (`consume.maxConcurrent`): 500 callClient requests to a
 * client method that holds each call until released never have more than the bound running,
 * and all are answered once released; on NATS, one past `maxQueued` is refused with -32000.
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
import { asUser, call, startApi, userOptions } from './support.js';

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

/**
 * A gateway with the API consuming `consume`, and a client whose method `hold` counts the calls
 * running at once (the most ever too) and answers each once `release` is called.
 */
async function heldClient(consume: Record<string, unknown>) {
  const running = await res.gateway(userOptions());
  const api = await startApi(running.gateway, { consume });
  apis.push(api);
  const client = res.client(asUser(running.url, 'held'));
  const counts = { running: 0, most: 0, answered: 0 };
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  client.method('hold', async () => {
    counts.running++;
    counts.most = Math.max(counts.most, counts.running);
    await released;
    counts.running--;
    counts.answered++;
    return 'done';
  });
  await client.call('rpc.ping');
  const sessionId = [...running.gateway.sessions.values()].find((s) => s.user === 'held')!.id;
  const request = (id: number) =>
    JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'callClient',
      params: { sessionId, method: 'hold', timeoutMs: 60_000 },
    });
  return { counts, release, request };
}

const CALLS = 500;
const BOUND = 4;

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

describe.skipIf(!redisUp && !mustRun)('a Redis stream consumer bounded by maxConcurrent', () => {
  it(`handles ${BOUND} entries at once while the rest wait in the stream, then all ${CALLS}`, async () => {
    const stream = `wsrpcapi:${randomBytes(5).toString('hex')}`;
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => {
      await redis.del(stream);
      redis.disconnect();
    });
    const held = await heldClient({ redisStream: stream, url: REDIS_URL, maxConcurrent: BOUND });
    const adds = redis.pipeline();
    for (let i = 1; i <= CALLS; i++) adds.xadd(stream, '*', 'request', held.request(i));
    await adds.exec();
    await waitFor(() => held.counts.running >= BOUND, `${BOUND} calls held at once`);
    expect(held.counts.running).toBe(BOUND);
    // The group has handed out only what the consumer had room for: the rest are in the stream.
    const pending = (await redis.xpending(stream, 'wsrpc-gateway')) as [number, ...unknown[]];
    expect(pending[0]).toBe(BOUND);
    held.release();
    await waitFor(() => held.counts.answered === CALLS, `all ${CALLS} calls answered`);
    await waitFor(async () => {
      const left = (await redis.xpending(stream, 'wsrpc-gateway')) as [number, ...unknown[]];
      return left[0] === 0;
    }, 'every entry acknowledged');
    expect(held.counts.most).toBe(BOUND);
  });
});

describe.skipIf(!natsUp && !mustRun)('a NATS subject consumer bounded by maxConcurrent', () => {
  it(`handles ${BOUND} at once, queues maxQueued, refuses one more with -32000, then answers the rest`, async () => {
    const subject = `wsrpcapi.${randomBytes(5).toString('hex')}`;
    const nc = await connectNats({ servers: NATS_URL });
    cleanups.push(() => nc.close());
    const held = await heldClient({
      natsSubject: subject,
      url: NATS_URL,
      maxConcurrent: BOUND,
      maxQueued: CALLS - BOUND,
    });
    const replies = Array.from({ length: CALLS }, (_, i) =>
      nc.request(subject, held.request(i + 1), { timeout: 60_000 }),
    );
    await waitFor(() => held.counts.running >= BOUND, `${BOUND} calls held at once`);
    // One message more than the slots and the queue hold: refused at once, under its id. The
    // subscription delivers in order, so the consumer has taken every earlier one by then.
    const refused = await nc.request(subject, held.request(CALLS + 1), { timeout: 10_000 });
    expect(JSON.parse(refused.string())).toEqual({
      jsonrpc: '2.0',
      id: CALLS + 1,
      error: { code: -32000, message: 'Server busy' },
    });
    expect(held.counts.running).toBe(BOUND);
    held.release();
    const answers = (await Promise.all(replies)).map(
      (reply) => JSON.parse(reply.string()) as unknown,
    );
    answers.forEach((answer, i) => {
      expect(answer).toEqual({ jsonrpc: '2.0', id: i + 1, result: { result: 'done' } });
    });
    expect(held.counts).toEqual({ running: 0, most: BOUND, answered: CALLS });
  });
});
