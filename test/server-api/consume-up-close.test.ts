/**
 * A Redis stream consumer is down (`up` false, and so its metric) from the moment close() is
 * called until it is gone: a read under way when it closes, answered afterwards, does not show it
 * up again. Readiness follows `up`, and a node that closes its server API on its way down must
 * not look ready to a load balancer meanwhile. A relay in front of a private redis-server holds
 * the consumer's commands, so that its read is under way, unanswered, when close() is called.
 * The fast-check model writes entries, holds a read or not, and closes: `up` is false at every
 * look from close() on (each value its figure is given, and as the held read's entry is
 * answered), and every entry, the held read's included, was handled once close() resolved.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { resolveServerApiConfig } from '../../src/server-api/config.js';
import { startConsumer } from '../../src/server-api/consume.js';
import type { Consumer } from '../../src/server-api/consume.js';
import { ConsumerFigures } from '../../src/server-api/consumer-metrics.js';
import { CaptureLogger } from '../support/logging.js';
import { hasProgram } from '../support/server-processes.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/waiting.js';
import type { PrivateRedis } from './private-redis.js';
import { withPrivateRedis } from './private-redis.js';
import { API_KEY } from './support.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
let redis: PrivateRedis;
let admin: Redis;
let streams = 0;

withPrivateRedis((server, client) => {
  redis = server;
  admin = client;
});

/** A consumer of a stream of its own, through a relay; what it answered, in order. */
async function relayedConsumer() {
  const relay = new TcpRelay(redis.port);
  await relay.start();
  const stream = `up-close-${process.pid}-${++streams}`;
  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    consume: { redisStream: stream, url: `redis://127.0.0.1:${relay.port}`, maxConcurrent: 4 },
  });
  const figures = new ConsumerFigures('redis');
  const answered: string[] = [];
  let answering: (() => void) | undefined;
  const consumer: Consumer = await startConsumer(
    config.consume!,
    undefined,
    {
      answer: (text) => {
        answered.push(text);
        answering?.();
        return Promise.resolve(undefined);
      },
      busy: () => '',
      failure: () => '',
      maxBytes: 1 << 20,
      figures,
    },
    new CaptureLogger(),
  );
  const add = (n: number) =>
    admin.xadd(
      stream,
      '*',
      'request',
      JSON.stringify({ jsonrpc: '2.0', method: 'n', params: [n] }),
    );
  /** Once the consumer is idle: up, and told of writes by its watch connection. */
  const idle = () =>
    waitFor(async () => {
      const list = (await admin.client('LIST')) as string;
      return consumer.up && /\bname=wsrpc-server-api-watch\b.*\bsub=1\b/.test(list);
    }, 'the consumer up and watching');
  /** Write an entry while the relay holds: resolves once the consumer's read is held. */
  const holdRead = async (n: number) => {
    relay.hold();
    await add(n);
    await waitFor(() => /evalsha|\beval\b/i.test(relay.heldText()), 'the read held');
  };
  /** Call `look` as each later request is answered. */
  const onAnswer = (look: () => void) => (answering = look);
  return { relay, consumer, figures, answered, add, idle, holdRead, onAnswer };
}

/** Call `look` with each value `figures.up` is given from now on. */
function watchFigure(figures: ConsumerFigures, look: (up: boolean) => void): void {
  let up = figures.up;
  Object.defineProperty(figures, 'up', {
    get: () => up,
    set: (value: boolean) => {
      up = value;
      look(value);
    },
  });
}

/** What `relayedConsumer` answered of `n`: the params of each request, in order. */
const numbers = (answered: string[]) =>
  answered.map((text) => (JSON.parse(text) as { params: [number] }).params[0]);

describe.skipIf(!hasRedisServer && !mustRun)('a Redis stream consumer that closes', () => {
  it('is down from close() on, a read under way answered afterwards included', async () => {
    const { relay, consumer, figures, idle, holdRead } = await relayedConsumer();
    try {
      await idle();
      await holdRead(1);
      const closing = consumer.close();
      expect(consumer.up).toBe(false);
      relay.release();
      await closing;
      expect(consumer.up).toBe(false);
      expect(figures.up).toBe(false);
    } finally {
      relay.release();
      await relay.cut();
    }
  });

  it('model: for any entries and a read held or not, down at every look from close() on', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 3 }), fc.boolean(), async (before, holding) => {
        const { relay, consumer, figures, answered, add, idle, holdRead, onAnswer } =
          await relayedConsumer();
        try {
          await idle();
          for (let n = 1; n <= before; n++) await add(n);
          await waitFor(() => answered.length === before, `${before} entries answered`);
          await idle();
          if (holding) await holdRead(before + 1);
          const closing = consumer.close();
          // Every look from here on: now, each value the figure is given, the consumer as the
          // held entry is answered, and once closed.
          const looks = [consumer.up, figures.up];
          watchFigure(figures, (up) => looks.push(up));
          onAnswer(() => looks.push(consumer.up));
          relay.release();
          await closing;
          looks.push(consumer.up, figures.up);
          expect(looks.filter((up) => up)).toEqual([]);
          // The read under way was answered before close() resolved: its entry was handled too.
          const written = before + (holding ? 1 : 0);
          expect(numbers(answered)).toEqual(Array.from({ length: written }, (_, i) => i + 1));
        } finally {
          relay.release();
          await relay.cut();
        }
      }),
      {
        numRuns: 6,
        endOnFailure: true,
        examples: [
          [0, true],
          [2, true],
        ],
      },
    );
  }, 120_000);
});
