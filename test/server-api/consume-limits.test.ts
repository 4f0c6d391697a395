/**
 * The consumed server API bounds a request as HTTP bounds its body (`maxBodyBytes`, in UTF-8
 * bytes): a Redis stream entry's `request` over it is logged and acknowledged, never handled; a
 * NATS message over it is refused at once with -32600 `Request too large` on its reply subject.
 * One of exactly `maxBodyBytes` is handled. Each test sends the one over the bound first, then
 * one at the bound, with one request handled at a time: the subscriber's first message (seq 1)
 * is the second's data, so the first published nothing.
 */
import { randomBytes } from 'node:crypto';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { take } from 'rxjs/operators';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveServerApiConfig, startServerApi } from '../../src/server-api/index.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { noTracing } from '../../src/tracing/index.js';
import { NATS_URL, REDIS_URL } from '../support/brokers.js';
import { CaptureLogger } from '../support/logging.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitFor, within } from '../support/waiting.js';
import { API_KEY, call, userOptions } from './support.js';

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

const MAX = 1024;

/** A publish request of exactly `bytes` UTF-8 bytes, its data `fill` repeated (then ASCII). */
function publishOf(bytes: number, fill: string): string {
  const text = (data: string) =>
    JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'publish', params: { topic: 'news', data } });
  let data = '';
  while (Buffer.byteLength(text(data + fill)) <= bytes) data += fill;
  while (Buffer.byteLength(text(data)) < bytes) data += 'a';
  const request = text(data);
  expect(Buffer.byteLength(request)).toBe(bytes);
  return request;
}

const dataOf = (request: string): unknown =>
  (JSON.parse(request) as { params: { data: unknown } }).params.data;

async function consumingGateway(consume: Record<string, unknown>) {
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  const logger = new CaptureLogger();
  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    maxBodyBytes: MAX,
    consume: { ...consume, maxConcurrent: 1 },
  });
  const api = (await startServerApi(running.gateway, config, {
    logger,
    tracing: noTracing,
  })) as ServerApi & { url: string };
  apis.push(api);
  const client = res.client(running.url);
  const received = firstValueFrom(client.subscribeWithMeta('news').pipe(take(1)));
  await waitFor(
    async () =>
      (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 1,
    'the subscription',
  );
  return { received, logger };
}

describe.skipIf(!redisUp && !mustRun)('a Redis stream entry over maxBodyBytes', () => {
  it('is logged and acknowledged, never handled; one at the bound is handled', async () => {
    const stream = `wsrpcapi:${randomBytes(5).toString('hex')}`;
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => {
      await redis.del(stream);
      redis.disconnect();
    });
    const { received, logger } = await consumingGateway({ redisStream: stream, url: REDIS_URL });
    // Fewer characters than the bound, more bytes: the bound is on UTF-8 bytes.
    const over = publishOf(MAX + 1, 'é');
    expect(over.length).toBeLessThanOrEqual(MAX);
    const overId = await redis.xadd(stream, '*', 'request', over);
    const atBound = publishOf(MAX, 'x');
    await redis.xadd(stream, '*', 'request', atBound);
    expect(await within(received, 'the publish at the bound')).toMatchObject({
      seq: 1,
      data: dataOf(atBound),
    });
    await waitFor(async () => {
      const pending = (await redis.xpending(stream, 'wsrpc-gateway')) as [number, ...unknown[]];
      return pending[0] === 0;
    }, 'every entry acknowledged');
    expect(logger.withMessage('server API: stream entry over maxBodyBytes; not handled')).toEqual([
      expect.objectContaining({ level: 'warn', obj: { stream, id: overId, maxBodyBytes: MAX } }),
    ]);
  });
});

describe.skipIf(!natsUp && !mustRun)('a NATS message over maxBodyBytes', () => {
  it('is refused with -32600 Request too large on its reply subject; one at the bound is handled', async () => {
    const subject = `wsrpcapi.${randomBytes(5).toString('hex')}`;
    const nc = await connectNats({ servers: NATS_URL });
    cleanups.push(() => nc.close());
    const { received, logger } = await consumingGateway({ natsSubject: subject, url: NATS_URL });
    const refused = await nc.request(subject, publishOf(MAX + 1, 'é'), { timeout: 5_000 });
    expect(JSON.parse(refused.string())).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Request too large', data: { maxBodyBytes: MAX } },
    });
    const atBound = publishOf(MAX, 'x');
    const answered = await nc.request(subject, atBound, { timeout: 5_000 });
    expect(JSON.parse(answered.string())).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: { seq: 1, duplicate: false },
    });
    expect(await within(received, 'the publish at the bound')).toMatchObject({
      seq: 1,
      data: dataOf(atBound),
    });
    expect(logger.withMessage('server API: NATS message over maxBodyBytes; refused')).toEqual([
      expect.objectContaining({
        level: 'warn',
        obj: { subject, bytes: MAX + 1, maxBodyBytes: MAX },
      }),
    ]);
  });
});
