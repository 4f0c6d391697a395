/**
 * What a Redis stream consumer can be made to hold: an entry whose `request` is over
 * `maxBodyBytes` is logged and acknowledged inside Redis, its body never sent to the gateway, so
 * what one read brings in is at most one request of `maxBodyBytes` per free slot. The same holds
 * for the entries taken over from a consumer that died (XAUTOCLAIM), and for an entry's other
 * fields (only `request` is read). Measured as the bytes a private redis-server sent to its
 * clients (INFO stats total_net_output_bytes) while the consumer took the entries.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveServerApiConfig, startServerApi } from '../../src/server-api/index.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { noTracing } from '../../src/tracing/index.js';
import { CaptureLogger } from '../support/logging.js';
import { hasProgram } from '../support/server-processes.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { PrivateRedis } from './private-redis.js';
import { API_KEY, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const res = new Resources();
const apis: ServerApi[] = [];
let redis: PrivateRedis;
let writer: Redis;

beforeAll(async () => {
  if (!hasRedisServer) return;
  redis = await PrivateRedis.start();
  writer = new Redis(redis.url);
});

afterAll(async () => {
  writer?.disconnect();
  await redis?.stop();
});

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

const MAX = 1024;
const GROUP = 'wsrpc-gateway';
/** Each oversized request: far more than everything else the test makes Redis send. */
const BIG = 512 * 1024;
const OVERSIZED = 6;

const publish = (data: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', method: 'publish', params: { topic: 'news', data } });

async function sentByRedis(): Promise<number> {
  const stats = await writer.info('stats');
  return Number(/total_net_output_bytes:(\d+)/.exec(stats)![1]);
}

let streams = 0;

/** The entries: OVERSIZED requests over MAX, and one small one with a large field beside it. */
async function addEntries(stream: string): Promise<void> {
  for (let i = 0; i < OVERSIZED; i++)
    await writer.xadd(stream, '*', 'request', publish('x'.repeat(BIG)));
  await writer.xadd(stream, '*', 'request', publish('small'), 'note', 'y'.repeat(BIG));
}

async function startConsumer(stream: string) {
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  const logger = new CaptureLogger();
  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    maxBodyBytes: MAX,
    consume: { redisStream: stream, url: redis.url, maxConcurrent: 4 },
  });
  apis.push(await startServerApi(running.gateway, config, { logger, tracing: noTracing }));
  /** Resolves once the small entry was handled and no entry of the stream is pending. */
  const done = () =>
    waitFor(async () => {
      const handled = (await running.gateway.broker.history('news', 0)).messages.length;
      const pending = (await writer.xpending(stream, GROUP)) as [number, ...unknown[]];
      const logged = logger.withMessage('server API: stream entry over maxBodyBytes; not handled');
      return handled === 1 && pending[0] === 0 && logged.length === OVERSIZED;
    }, 'the entries taken and acknowledged');
  return { running, logger, done };
}

describe.skipIf(!hasRedisServer && !mustRun)('Redis stream entries over maxBodyBytes', () => {
  it('are acknowledged without their bodies ever leaving Redis', async () => {
    const stream = `size-${process.pid}-${++streams}`;
    const { done, running } = await startConsumer(stream);
    const before = await sentByRedis();
    await addEntries(stream);
    await done();
    expect(JSON.parse((await running.gateway.broker.history('news', 0)).messages[0]!.payload)).toBe(
      'small',
    );
    expect((await sentByRedis()) - before).toBeLessThan(BIG / 4);
  });

  it('taken over from a consumer that died, are acknowledged the same way', async () => {
    const stream = `size-${process.pid}-${++streams}`;
    await writer.xgroup('CREATE', stream, GROUP, '$', 'MKSTREAM');
    await addEntries(stream);
    // A consumer read them and died: pending, idle for longer than a takeover waits.
    const read = (await writer.xreadgroup('GROUP', GROUP, 'dead', 'STREAMS', stream, '>')) as [
      string,
      [string, string[]][],
    ][];
    const ids = read[0]![1].map(([id]) => id);
    await writer.xclaim(stream, GROUP, 'dead', 0, ...ids, 'IDLE', 3_600_000, 'JUSTID');
    const before = await sentByRedis();
    const { done } = await startConsumer(stream);
    await done();
    expect((await sentByRedis()) - before).toBeLessThan(BIG / 4);
  });
});
