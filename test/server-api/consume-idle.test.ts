/**
 * An idle Redis stream consumer waits for its stream to be written instead of asking Redis over
 * and over: over an idle stretch it runs no take (counted by Redis itself, INFO commandstats of a
 * private redis-server that only the consumer and this test use), and an entry written then is
 * answered. Its wake-up connection comes back after it is cut; a Redis that refuses CLIENT
 * TRACKING (an ACL) leaves the consumer polling, still answering; close() lets go of every
 * connection the consumer opened. The fast-check model writes entries between idle stretches and
 * cuts of the wake-up connection, and writes another stream whose name starts with the
 * consumer's during idle stretches: every entry is handled once, and an idle stretch runs no take.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { sleep } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { hasProgram } from '../support/server-processes.js';
import { waitFor } from '../support/waiting.js';
import type { PrivateRedis } from './private-redis.js';
import { withPrivateRedis } from './private-redis.js';
import { startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const res = new Resources();
const apis: ServerApi[] = [];
let redis: PrivateRedis;
let admin: Redis;

/** An idle stretch: long enough for a consumer that polls to poll several times. */
const IDLE_STRETCH_MS = 600;

withPrivateRedis((server, client) => {
  redis = server;
  admin = client;
});

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

let streams = 0;

/** A gateway whose server API consumes a stream of its own on the private Redis, at `url`. */
async function consumer(url = redis.url) {
  const stream = `idle-${process.pid}-${++streams}`;
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  const api = await startApi(running.gateway, {
    consume: { redisStream: stream, url, maxConcurrent: 4 },
  });
  apis.push(api);
  const published = async (): Promise<number[]> =>
    (await running.gateway.broker.history('news', 0, 10_000)).messages.map(
      (message) => JSON.parse(message.payload) as number,
    );
  const add = (data: number) =>
    admin.xadd(
      stream,
      '*',
      'request',
      JSON.stringify({ jsonrpc: '2.0', method: 'publish', params: { topic: 'news', data } }),
    );
  const handled = (data: number) =>
    waitFor(async () => (await published()).includes(data), `entry ${data} handled`, 15_000);
  return { api, stream, add, handled, published };
}

/** Takes (the script, run as EVALSHA or EVAL) Redis ran since the last reset. */
async function takesSinceReset(): Promise<number> {
  const info = await admin.info('commandstats');
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) {
    calls += Number(match[1]);
  }
  return calls;
}

/**
 * Takes over an idle stretch (`stretch`, by default IDLE_STRETCH_MS of nothing), once the consumer
 * watches its stream and has settled.
 */
async function takesWhileIdle(
  stretch: () => Promise<void> = () => sleep(IDLE_STRETCH_MS),
): Promise<number> {
  await waitFor(async () => {
    const list = (await admin.client('LIST')) as string;
    return list.split('\n').some((l) => /\bname=wsrpc-server-api-watch\b.*\bsub=1\b/.test(l));
  }, 'the watch connection subscribed');
  // Settled: a short window without a take (a consumer that polls never gets there).
  await waitFor(
    async () => {
      await admin.config('RESETSTAT');
      await sleep(100);
      return (await takesSinceReset()) === 0;
    },
    'the consumer idle',
    10_000,
  );
  await admin.config('RESETSTAT');
  await stretch();
  return takesSinceReset();
}

/** Connections open on the private Redis by name. */
async function connectionNames(): Promise<string[]> {
  const list = (await admin.client('LIST')) as string;
  return list
    .split('\n')
    .map((line) => /\bname=(\S*)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith('wsrpc-server-api'));
}

/** Cut the consumer's wake-up connection (once it is there: it comes back after a cut). */
async function killWatch(): Promise<void> {
  let id: string | undefined;
  await waitFor(async () => {
    const list = (await admin.client('LIST')) as string;
    const line = list.split('\n').find((l) => /\bname=wsrpc-server-api-watch\b/.test(l));
    id = /\bid=(\d+)/.exec(line ?? '')?.[1];
    return id !== undefined;
  }, 'the watch connection');
  await admin.client('KILL', 'ID', id!);
}

describe.skipIf(!hasRedisServer && !mustRun)('an idle Redis stream consumer', () => {
  it('runs no take over an idle stretch, and answers an entry written then', async () => {
    const { add, handled } = await consumer();
    await add(1);
    await handled(1);
    expect(await takesWhileIdle()).toBeLessThanOrEqual(1);
    await add(2);
    await handled(2);
    expect(await takesWhileIdle()).toBeLessThanOrEqual(1);
  }, 60_000);

  it('watches again once its wake-up connection is cut', async () => {
    const { add, handled } = await consumer();
    await add(1);
    await handled(1);
    await killWatch();
    await waitFor(
      async () => (await connectionNames()).includes('wsrpc-server-api-watch'),
      'the watch connection back',
    );
    await add(2);
    await handled(2);
    expect(await takesWhileIdle()).toBeLessThanOrEqual(1);
    await add(3);
    await handled(3);
  }, 60_000);

  it('model: for any writes, idle stretches and cuts, each entry is handled once', async () => {
    // `other`: an idle stretch in which another stream is written, one whose name starts with
    // the consumer's (the wake-up connection tracks the name as a prefix, so Redis tells it of
    // that stream's writes too), `count` times spread over the stretch.
    type Step =
      | { kind: 'add'; count: number }
      | { kind: 'idle' }
      | { kind: 'cut' }
      | { kind: 'other'; count: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      {
        arbitrary: fc.record({
          kind: fc.constant('add' as const),
          count: fc.integer({ min: 1, max: 5 }),
        }),
        weight: 3,
      },
      { arbitrary: fc.constant({ kind: 'idle' as const }), weight: 1 },
      { arbitrary: fc.constant({ kind: 'cut' as const }), weight: 1 },
      {
        arbitrary: fc.record({
          kind: fc.constant('other' as const),
          count: fc.integer({ min: 2, max: 3 }),
        }),
        weight: 1,
      },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 4 }), async (steps) => {
        const { stream, add, published } = await consumer();
        const written: number[] = [];
        try {
          for (const next of steps) {
            if (next.kind === 'idle') expect(await takesWhileIdle()).toBeLessThanOrEqual(1);
            else if (next.kind === 'cut') await killWatch();
            else if (next.kind === 'other') {
              const other = `${stream}-other`;
              const takes = await takesWhileIdle(async () => {
                for (let i = 0; i < next.count; i++) {
                  await admin.xadd(other, '*', 'request', '{}');
                  await sleep(IDLE_STRETCH_MS / next.count);
                }
              });
              expect(takes).toBeLessThanOrEqual(1);
            } else {
              for (let i = 0; i < next.count; i++) {
                written.push(written.length + 1);
                await add(written.length);
              }
            }
            // After every step: every entry written so far handled, each once.
            let seen: number[] = [];
            await waitFor(
              async () => (seen = await published()).length >= written.length,
              () => `entries ${JSON.stringify(written)} handled (${JSON.stringify(seen)})`,
              15_000,
            );
            expect([...seen].sort((a, b) => a - b)).toEqual(written);
          }
        } finally {
          await apis.pop()?.close();
          await res.cleanup();
        }
      }),
      {
        numRuns: 6,
        endOnFailure: true,
        examples: [
          [
            [
              { kind: 'add', count: 2 },
              { kind: 'cut' },
              { kind: 'idle' },
              { kind: 'add', count: 1 },
            ],
          ],
          [
            [
              { kind: 'add', count: 1 },
              { kind: 'other', count: 3 },
              { kind: 'add', count: 1 },
            ],
          ],
        ],
      },
    );
  }, 120_000);

  it('polls, still answering, where Redis refuses CLIENT TRACKING', async () => {
    await admin.call(
      'ACL',
      'SETUSER',
      'notracking',
      'on',
      '>secret-pass',
      '~*',
      '&*',
      '+@all',
      '-client|tracking',
    );
    const url = `redis://notracking:secret-pass@127.0.0.1:${redis.port}`;
    const { add, handled } = await consumer(url);
    await add(1);
    await handled(1);
    // The watch connection is made, refused, and let go of.
    await waitFor(
      async () => !(await connectionNames()).includes('wsrpc-server-api-watch'),
      'no watch connection',
    );
    await add(2);
    await handled(2);
  });

  it('lets go of its connections on close, idle or not', async () => {
    const { api, add, handled } = await consumer();
    await add(1);
    await handled(1);
    // Those of the consumers before are gone once they are closed.
    await waitFor(
      async () =>
        JSON.stringify((await connectionNames()).sort()) ===
        JSON.stringify(['wsrpc-server-api', 'wsrpc-server-api-watch']),
      "the consumer's two connections",
    );
    await api.close();
    await waitFor(async () => (await connectionNames()).length === 0, 'no consumer connection');
  });
});
