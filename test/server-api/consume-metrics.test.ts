/**
 * What an operator sees of the server API's consumer, on the gateway's /metrics and on
 * `api.consumer`: whether it reads its broker (`wsrpc_server_api_consumer_up`), the requests it
 * took by outcome, its read failures by reason, the requests in progress (and, NATS, queued).
 * A private redis-server and a private nats-server are killed and started again: the consumer
 * shows down, counts why, and shows up again once it reads.
 */
import { connect as connectNats } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { hasProgram } from '../support/server-processes.js';
import { waitFor, within } from '../support/waiting.js';
import { PrivateNats } from './private-nats.js';
import type { PrivateRedis } from './private-redis.js';
import { withPrivateRedis } from './private-redis.js';
import { asUser, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const hasNatsServer = hasProgram('nats-server');
const res = new Resources();
const apis: ServerApi[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

/** Requests of at most this many bytes are taken (a small bound, to refuse one cheaply). */
const MAX_BYTES = 300;

const publish = (data: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'publish', params: { topic: 'news', data } });

/** A gateway (metrics never cached) whose server API consumes `consume`. */
async function consuming(consume: Record<string, unknown>) {
  const running = await res.gateway({
    ...userOptions(),
    limits: { metricsCacheMs: 0, probeRequestsPerSecondPerIp: 0 },
  } as GatewayOptions<{ user?: string }>);
  running.gateway.topic('news');
  const api = await startApi(running.gateway, { consume, maxBodyBytes: MAX_BYTES });
  apis.push(api);
  /** The value of one consumer metric of `kind`, with `labels` besides. */
  const metric = async (
    name: string,
    kind: string,
    labels: Record<string, string> = {},
  ): Promise<number | undefined> =>
    sampleValue(await scrape(running.httpUrl), `wsrpc_server_api_${name}`, { kind, ...labels });
  /** Wait until every metric named holds its value. */
  const shows = (kind: string, wanted: [string, Record<string, string>, number][]) => {
    let last = '';
    return waitFor(
      async () => {
        const seen = await Promise.all(wanted.map(([name, labels]) => metric(name, kind, labels)));
        last = JSON.stringify(seen);
        return seen.every((value, i) => value === wanted[i]![2]);
      },
      () => `${JSON.stringify(wanted)} (seen ${last})`,
    );
  };
  return { running, api, metric, shows };
}

describe.skipIf(!hasRedisServer && !mustRun)('the Redis stream consumer in metrics', () => {
  let redis: PrivateRedis;
  let writer: Redis;

  // The writer queues its commands while Redis is down, and sends them once it is back.
  withPrivateRedis((server, client) => {
    redis = server;
    writer = client;
  });

  it('counts what it took, shows down while it cannot read, counts why, and shows up again', async () => {
    const stream = `metrics-${process.pid}-1`;
    const { api, metric, shows } = await consuming({ redisStream: stream, url: redis.url });
    expect(await metric('consumer_up', 'redis')).toBe(1);
    expect(api.consumer).toEqual({ kind: 'redis', up: true });
    await writer.xadd(stream, '*', 'request', publish(1));
    await writer.xadd(stream, '*', 'request', publish('x'.repeat(MAX_BYTES)));
    await writer.xadd(stream, '*', 'other', 'field');
    await writer.xadd(stream, '*', 'request', Buffer.from([0x7b, 0xff, 0x7d]));
    await shows('redis', [
      ['consumed_total', { outcome: 'handled' }, 1],
      ['consumed_total', { outcome: 'too_large' }, 1],
      ['consumed_total', { outcome: 'invalid' }, 2],
      ['consumed_total', { outcome: 'busy' }, 0],
      ['consumer_in_progress', {}, 0],
      ['consumer_failures_total', { reason: 'read' }, 0],
    ]);

    // The key made something else than a stream (SET replaces it at once): every read fails.
    await writer.set(stream, 'not a stream');
    await waitFor(
      async () =>
        (await metric('consumer_up', 'redis')) === 0 &&
        ((await metric('consumer_failures_total', 'redis', { reason: 'read' })) ?? 0) >= 1,
      'the consumer shown down, its failed reads counted',
    );
    expect(api.consumer).toEqual({ kind: 'redis', up: false });

    // Gone: the group is made again, and the entry written then handled.
    await writer.del(stream);
    await writer.xadd(stream, '*', 'request', publish(2));
    await shows('redis', [
      ['consumer_up', {}, 1],
      ['consumed_total', { outcome: 'handled' }, 2],
      ['consumer_failures_total', { reason: 'group_lost' }, 1],
    ]);

    // Redis itself away: shown down, the lost connection counted; back empty, up again.
    await redis.stop();
    await shows('redis', [
      ['consumer_up', {}, 0],
      ['consumer_failures_total', { reason: 'disconnected' }, 1],
    ]);
    expect(api.consumer).toEqual({ kind: 'redis', up: false });
    await redis.run();
    await writer.xadd(stream, '*', 'request', publish(3));
    await shows('redis', [
      ['consumer_up', {}, 1],
      ['consumed_total', { outcome: 'handled' }, 3],
      ['consumer_failures_total', { reason: 'group_lost' }, 2],
    ]);
    expect(api.consumer).toEqual({ kind: 'redis', up: true });

    await api.close();
    expect(await metric('consumer_up', 'redis')).toBe(0);
    expect(api.consumer).toEqual({ kind: 'redis', up: false });
  });

  it('closes at once while Redis is away', async () => {
    const { api, shows } = await consuming({
      redisStream: `metrics-${process.pid}-2`,
      url: redis.url,
    });
    await redis.stop();
    try {
      await shows('redis', [['consumer_up', {}, 0]]);
      await within(api.close(), 'the server API to close');
      expect(api.consumer).toEqual({ kind: 'redis', up: false });
    } finally {
      await redis.run();
    }
  });
});

describe.skipIf(!hasNatsServer && !mustRun)('the NATS subject consumer in metrics', () => {
  let nats: PrivateNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    if (!hasNatsServer) return;
    nats = await PrivateNats.start();
    nc = await connectNats({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 50 });
  });

  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('counts what it took and refused, shows down while NATS is, and up again', async () => {
    const subject = `metrics.${process.pid}`;
    const { running, api, metric, shows } = await consuming({
      natsSubject: subject,
      url: nats.url,
      maxConcurrent: 1,
      maxQueued: 0,
    });
    expect(await metric('consumer_up', 'nats')).toBe(1);
    expect(api.consumer).toEqual({ kind: 'nats', up: true });

    // A client whose method holds its one call: the one slot is taken, the next is refused.
    const client = res.client(asUser(running.url, 'held'));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    client.method('hold', async () => {
      await released;
      return 'done';
    });
    await client.call('rpc.ping');
    const sessionId = [...running.gateway.sessions.values()].find((s) => s.user === 'held')!.id;
    const hold = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'callClient',
      params: { sessionId, method: 'hold', timeoutMs: 60_000 },
    });
    const held = nc.request(subject, hold, { timeout: 30_000 });
    await shows('nats', [['consumer_in_progress', {}, 1]]);
    const busy = await nc.request(subject, hold, { timeout: 5_000 });
    expect(JSON.parse(busy.string())).toMatchObject({ id: 1, error: { code: -32000 } });
    release();
    await held;
    await nc.request(subject, publish('x'.repeat(MAX_BYTES)), { timeout: 5_000 });
    await nc.request(subject, new Uint8Array([0x7b, 0xff, 0x7d]), { timeout: 5_000 });
    await shows('nats', [
      ['consumed_total', { outcome: 'handled' }, 1],
      ['consumed_total', { outcome: 'busy' }, 1],
      ['consumed_total', { outcome: 'too_large' }, 1],
      ['consumed_total', { outcome: 'invalid' }, 1],
      ['consumer_in_progress', {}, 0],
      ['consumer_queued', {}, 0],
    ]);

    await nats.stop();
    await shows('nats', [
      ['consumer_up', {}, 0],
      ['consumer_failures_total', { reason: 'disconnected' }, 1],
    ]);
    expect(api.consumer).toEqual({ kind: 'nats', up: false });

    await nats.run();
    await shows('nats', [['consumer_up', {}, 1]]);
    expect(api.consumer).toEqual({ kind: 'nats', up: true });
    await waitFor(async () => {
      const reply = await nc.request(subject, publish(2), { timeout: 1_000 }).catch(() => null);
      return reply !== null && JSON.parse(reply.string()).result !== undefined;
    }, 'a request answered after the restart');

    await api.close();
    expect(await metric('consumer_up', 'nats')).toBe(0);
    expect(api.consumer).toEqual({ kind: 'nats', up: false });
  });
});
