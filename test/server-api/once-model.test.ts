/**
 * Idempotent publish (Broker.publishOnce) against a Map model, with fast-check: random
 * interleavings of publishes with and without keys, on two topics, retries (the same key again,
 * some at once, concurrently), windows of different lengths and time passing. The model says,
 * for every publish, its seq and whether it is a duplicate; MemoryBroker runs on a fake clock,
 * RedisBroker on real time (a retry within `fuzzMs` of its window's end may go either way, and
 * the model follows what the broker did). Every published message is delivered once.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const prefixes: string[] = [];

afterAll(async () => {
  for (const prefix of prefixes) await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
});

type Op =
  | { kind: 'publish'; topic: number; key: number | undefined; windowMs: number; copies: number }
  | { kind: 'pass'; ms: number };

const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('publish' as const),
      topic: fc.integer({ min: 0, max: 1 }),
      key: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
      windowMs: fc.constantFrom(40, 120, 400),
      // Several copies at once: retries racing each other.
      copies: fc.integer({ min: 1, max: 3 }),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('pass' as const),
      // Whole windows too: on the fake clock a retry then comes the millisecond its key lapses.
      ms: fc.oneof(fc.integer({ min: 1, max: 150 }), fc.constantFrom(40, 120, 400)),
    }),
    weight: 1,
  },
);

const once = (topic: number, key: number, windowMs: number): Op => ({
  kind: 'publish',
  topic,
  key,
  windowMs,
  copies: 1,
});

/** A retry after its key's window lapsed (the window in ms, not longer), and one within it. */
const redisExamples: [Op[]][] = [
  [[once(0, 1, 40), { kind: 'pass', ms: 120 }, once(0, 1, 40), once(1, 1, 40)]],
  [[once(1, 2, 400), { kind: 'pass', ms: 40 }, once(1, 2, 400), once(0, 2, 400)]],
];

async function runModel(
  broker: Broker,
  ops: readonly Op[],
  clock: () => number,
  pass: (ms: number) => Promise<void>,
  fuzzMs: number,
): Promise<void> {
  const run = randomBytes(4).toString('hex');
  const topics = [`once.${run}.a`, `once.${run}.b`];
  const delivered: Record<string, number[]> = {};
  for (const topic of topics) {
    delivered[topic] = [];
    await broker.subscribe(topic, (message: BrokerMessage) => delivered[topic]!.push(message.seq));
  }
  const lastSeq = new Map<string, number>();
  /**
   * By topic and key: the first publish's seq and when its window ends, between `until` (the
   * window counted from before the publish was sent) and `untilLatest` (from after its answer).
   */
  const held = new Map<string, { seq: number; until: number; untilLatest: number }>();
  try {
    for (const op of ops) {
      if (op.kind === 'pass') {
        await pass(op.ms);
        continue;
      }
      const topic = topics[op.topic]!;
      if (op.key === undefined) {
        const seq = await broker.publish(topic, '1');
        expect(seq).toBe((lastSeq.get(topic) ?? 0) + 1);
        lastSeq.set(topic, seq);
        continue;
      }
      const key = `k${op.key}`;
      const id = `${topic}\n${key}`;
      const before = clock();
      const results = await Promise.all(
        Array.from({ length: op.copies }, () => broker.publishOnce!(topic, '1', key, op.windowMs)),
      );
      const after = clock();
      // Racing copies: one publishes (or none, when the key is held), the others are duplicates.
      const fresh = results.filter((r) => !r.duplicate);
      expect(fresh.length).toBeLessThanOrEqual(1);
      expect(new Set(results.map((r) => r.seq)).size).toBe(1);
      const entry = held.get(id);
      const holds = entry !== undefined && entry.until > after + fuzzMs;
      const lapsed = entry === undefined || entry.untilLatest <= before - fuzzMs;
      if (holds) expect(results[0]).toEqual({ seq: entry.seq, duplicate: true });
      if (lapsed) expect(fresh).toHaveLength(1);
      if (fresh.length === 1) {
        expect(fresh[0]!.seq).toBe((lastSeq.get(topic) ?? 0) + 1);
        lastSeq.set(topic, fresh[0]!.seq);
        held.set(id, {
          seq: fresh[0]!.seq,
          until: before + op.windowMs,
          untilLatest: after + op.windowMs,
        });
      } else {
        expect(results[0]!.seq).toBe(entry!.seq);
      }
    }
    // Every publish the broker took was delivered, once, in order.
    for (const topic of topics) {
      const last = lastSeq.get(topic) ?? 0;
      await waitFor(() => delivered[topic]!.length >= last, `${topic} delivered`, 5_000);
      expect(delivered[topic]).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    }
  } finally {
    for (const topic of topics) await broker.unsubscribe(topic);
  }
}

describe('idempotent publish against a Map model', () => {
  it('MemoryBroker: keys, retries, windows and time passing', async () => {
    await fc.assert(
      // Full-length runs: at fast-check's default size a run is ~5 steps.
      fc.asyncProperty(fc.array(opArbitrary, { maxLength: 40, size: 'max' }), async (ops) => {
        let now = 1_000_000;
        const broker = new MemoryBroker({ now: () => now });
        await runModel(
          broker,
          ops,
          () => now,
          (ms) => {
            now += ms;
            return Promise.resolve();
          },
          0,
        );
        await broker.close();
      }),
      { numRuns: 300 },
    );
  });

  it('MemoryBroker: beyond maxIdempotencyKeys the oldest key is forgotten first', async () => {
    const broker = new MemoryBroker({ maxIdempotencyKeys: 2 });
    expect(await broker.publishOnce('t', '1', 'a', 60_000)).toEqual({ seq: 1, duplicate: false });
    expect(await broker.publishOnce('t', '1', 'b', 60_000)).toEqual({ seq: 2, duplicate: false });
    expect(await broker.publishOnce('t', '1', 'c', 60_000)).toEqual({ seq: 3, duplicate: false });
    expect(await broker.publishOnce('t', '1', 'c', 60_000)).toEqual({ seq: 3, duplicate: true });
    expect(await broker.publishOnce('t', '1', 'b', 60_000)).toEqual({ seq: 2, duplicate: true });
    expect(await broker.publishOnce('t', '1', 'a', 60_000)).toEqual({ seq: 4, duplicate: false });
    await broker.close();
  });

  it.skipIf(!redisUp && !mustRun)(
    'RedisBroker: keys, retries, windows and time passing',
    async () => {
      const prefix = `wsrpconce${randomBytes(5).toString('hex')}`;
      prefixes.push(prefix);
      const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
      try {
        await fc.assert(
          fc.asyncProperty(fc.array(opArbitrary, { maxLength: 25 }), async (ops) => {
            await runModel(broker, ops, Date.now, sleep, 25);
          }),
          // Runs are short at fast-check's default size, and a key retried after its window
          // (or within it) on the same topic is rare in them: one example of each.
          { numRuns: 12, examples: redisExamples },
        );
      } finally {
        await broker.close();
      }
    },
    120_000,
  );
});
