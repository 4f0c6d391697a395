/**
 * A Redis stream consumer outlives its stream: Redis restarting without persistence, or the
 * stream's key deleted, takes the consumer group with it; the consumer makes the group again
 * (from the new stream's start) and handles every entry written afterwards, each once. A
 * private redis-server is restarted; the fast-check model runs random sequences of writes,
 * deletions and restarts, and every entry written is handled exactly once.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { hasProgram } from '../support/server-processes.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import type { PrivateRedis } from './private-redis.js';
import { withPrivateRedis } from './private-redis.js';
import { startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const res = new Resources();
const apis: ServerApi[] = [];
let redis: PrivateRedis;
let writer: Redis;

// The writer queues its commands while Redis restarts, and sends them once it is back.
withPrivateRedis((server, client) => {
  redis = server;
  writer = client;
});

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

let streams = 0;

/** A gateway whose server API consumes a stream of its own; `handled()` lists the data published. */
async function consumer() {
  const stream = `lost-${process.pid}-${++streams}`;
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  const api = await startApi(running.gateway, {
    consume: { redisStream: stream, url: redis.url, maxConcurrent: 4 },
  });
  apis.push(api);
  const handled = async (): Promise<number[]> =>
    (await running.gateway.broker.history('news', 0, 10_000)).messages.map(
      (message) => JSON.parse(message.payload) as number,
    );
  /** The request an entry carries: publish `data` on news. */
  const request = (data: number) =>
    JSON.stringify({ jsonrpc: '2.0', method: 'publish', params: { topic: 'news', data } });
  const add = (data: number) => writer.xadd(stream, '*', 'request', request(data));
  /** Resolves once every one of `expected` was handled; the caller checks how often. */
  const handledAll = async (expected: number[]): Promise<number[]> => {
    let seen: number[] = [];
    await waitFor(
      async () => {
        seen = await handled();
        return expected.every((data) => seen.includes(data));
      },
      () => `entries ${JSON.stringify(expected)} handled (handled: ${JSON.stringify(seen)})`,
      15_000,
    );
    return seen;
  };
  return { stream, add, request, handledAll };
}

const sorted = (values: number[]) => [...values].sort((a, b) => a - b);

describe.skipIf(!hasRedisServer && !mustRun)('a Redis stream consumer whose stream is lost', () => {
  it('handles the entries written after Redis restarted empty', async () => {
    const { add, handledAll } = await consumer();
    await add(1);
    await handledAll([1]);
    await redis.restart();
    for (const data of [2, 3, 4]) await add(data);
    expect(sorted(await handledAll([1, 2, 3, 4]))).toEqual([1, 2, 3, 4]);
  });

  it('handles the entries written after the stream was deleted', async () => {
    const { stream, add, handledAll } = await consumer();
    await add(1);
    await handledAll([1]);
    await writer.del(stream);
    for (const data of [2, 3, 4]) await add(data);
    expect(sorted(await handledAll([1, 2, 3, 4]))).toEqual([1, 2, 3, 4]);
  });

  it('model: for any writes, deletions and restarts, every entry written is handled once', async () => {
    // A deletion may come with entries written in the same transaction: they are in the new
    // stream before the consumer can notice its group gone, so a group made again from anywhere
    // but the stream's start would skip them.
    type Step =
      { kind: 'add'; count: number } | { kind: 'delete'; count: number } | { kind: 'restart' };
    const step: fc.Arbitrary<Step> = fc.oneof(
      {
        arbitrary: fc.record({
          kind: fc.constant('add' as const),
          count: fc.integer({ min: 1, max: 3 }),
        }),
        weight: 3,
      },
      {
        arbitrary: fc.record({
          kind: fc.constant('delete' as const),
          count: fc.integer({ min: 0, max: 2 }),
        }),
        weight: 1,
      },
      { arbitrary: fc.constant({ kind: 'restart' as const }), weight: 1 },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 5 }), async (steps) => {
        const { stream, add, request, handledAll } = await consumer();
        const written: number[] = [];
        /** The next `count` entries' data, counted as written. */
        const next = (count: number): number[] =>
          Array.from({ length: count }, () => {
            written.push(written.length + 1);
            return written.length;
          });
        try {
          for (const at of steps) {
            if (at.kind === 'restart') await redis.restart();
            else if (at.kind === 'delete') {
              const transaction = writer.multi().del(stream);
              for (const data of next(at.count)) {
                transaction.xadd(stream, '*', 'request', request(data));
              }
              await transaction.exec();
            } else {
              // Written at once after a loss, before the consumer can have noticed it.
              for (const data of next(at.count)) await add(data);
            }
            // After every step: every entry written so far handled, each once.
            const seen = await handledAll(written);
            expect(sorted(seen)).toEqual(written);
          }
        } finally {
          await apis.pop()?.close();
          await res.cleanup();
        }
      }),
      {
        numRuns: 8,
        endOnFailure: true,
        examples: [
          [
            [
              { kind: 'add', count: 1 },
              { kind: 'delete', count: 2 },
              { kind: 'add', count: 1 },
            ],
          ],
          [[{ kind: 'add', count: 1 }, { kind: 'restart' }, { kind: 'add', count: 2 }]],
        ],
      },
    );
  });
});
