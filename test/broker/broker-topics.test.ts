/**
 * What a topic costs on each broker (issue 14, findings 5 and 6): history read a page at a
 * time (`history(topic, afterSeq, limit)`), nothing created on Redis by a subscribe or a read
 * (a topic's keys are made by its first publish), and new topics' keys made at most so many
 * per second per node. Memory broker in process; Redis on the shared server under a random
 * prefix.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { TopicCreationLimitError } from '../../src/pubsub/broker.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const inCi = process.env.CI === 'true';
const hasRedis = (await canConnect(6379)) || inCi;
const hasNats = (await canConnect(4222)) || inCi;
const run = `wsrpch14t${randomBytes(4).toString('hex')}`;

const brokers: Broker[] = [];
afterEach(async () => {
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});
afterAll(async () => {
  if (hasRedis) await deleteRedisKeys(REDIS_URL, run);
  if (hasNats) await deleteNatsStreams(run).catch(() => 0);
});

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

const kinds: { name: string; available: boolean; open: () => Promise<Broker> }[] = [
  { name: 'memory', available: true, open: () => Promise.resolve(new MemoryBroker()) },
  {
    name: 'Redis',
    available: hasRedis,
    open: () => RedisBroker.create({ url: REDIS_URL, prefix: `${run}:pages:` }),
  },
  {
    name: 'NATS',
    available: hasNats,
    open: () => NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', prefix: run }),
  },
];

describe.each(kinds)('history pages on the $name broker', ({ available, open }) => {
  it.skipIf(!available)(
    'reads at most `limit` messages, oldest first, with the last seq',
    async () => {
      const broker = await open();
      brokers.push(broker);
      const topic = `paged.${randomBytes(4).toString('hex')}`;
      for (const i of range(1, 25)) expect(await broker.publish(topic, String(i))).toBe(i);
      const first = await broker.history(topic, 0, 10);
      expect(first.messages.map((m) => m.seq)).toEqual(range(1, 10));
      expect(first.lastSeq).toBe(25);
      const second = await broker.history(topic, 10, 10);
      expect(second.messages.map((m) => m.seq)).toEqual(range(11, 20));
      expect(second.epoch).toBe(first.epoch);
      const last = await broker.history(topic, 20, 10);
      expect(last.messages.map((m) => m.payload)).toEqual(range(21, 25).map(String));
      expect((await broker.history(topic, 25, 10)).messages).toEqual([]);
      // No limit: everything after the seq, as before.
      expect((await broker.history(topic, 5)).messages.map((m) => m.seq)).toEqual(range(6, 25));
    },
  );
});

describe.skipIf(!hasRedis)('Redis keys', () => {
  async function keysUnder(prefix: string): Promise<string[]> {
    const redis = new Redis(REDIS_URL);
    try {
      return await redis.keys(`${prefix}*`);
    } finally {
      redis.disconnect();
    }
  }

  it('a subscribe, a history read and an unsubscribe create no key', async () => {
    const prefix = `${run}:nokeys:`;
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const topics = range(1, 100).map((i) => `priv.user${i}.${randomBytes(3).toString('hex')}`);
    await Promise.all(topics.map((topic) => broker.subscribe(topic, () => undefined)));
    await Promise.all(topics.map((topic) => broker.history(topic, 0, 100)));
    expect(await keysUnder(prefix)).toEqual([]);
    await Promise.all(topics.map((topic) => broker.unsubscribe(topic)));
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('makes at most newTopicsBurst topics at once (then newTopicsPerSecond); existing ones stay open', async () => {
    const prefix = `${run}:budget:`;
    const broker = await RedisBroker.create({
      url: REDIS_URL,
      prefix,
      newTopicsPerSecond: 0.001,
      newTopicsBurst: 3,
    });
    brokers.push(broker);
    for (const i of range(1, 3)) expect(await broker.publish(`t.${i}`, '1')).toBe(1);
    const refused = broker.publish('t.4', '1');
    await expect(refused).rejects.toBeInstanceOf(TopicCreationLimitError);
    await expect(refused).rejects.toThrow(/at most 0.001 topics per second/);
    // Nothing was written for the refused topic.
    expect((await keysUnder(prefix)).filter((key) => key.includes('{t.4}'))).toEqual([]);
    for (const i of range(1, 3)) expect(await broker.publish(`t.${i}`, '2')).toBe(2);
    // Another node sees them as existing, within its own budget.
    const other = await RedisBroker.create({
      url: REDIS_URL,
      prefix,
      newTopicsPerSecond: 0.001,
      newTopicsBurst: 1,
    });
    brokers.push(other);
    for (const i of range(1, 3)) expect(await other.publish(`t.${i}`, '3')).toBe(3);
  });
});

describe.skipIf(!hasRedis)('a user inbox past the budget for new topics', () => {
  const res = new Resources();
  afterEach(() => res.cleanup());

  it('notifyUser to a user whose inbox is not on the broker yet is -32003 naming the budget, not -32009', async () => {
    const broker = await RedisBroker.create({
      url: REDIS_URL,
      prefix: `${run}:inbox-budget:`,
      newTopicsPerSecond: 0.001,
      newTopicsBurst: 1,
    });
    brokers.push(broker);
    const { gateway } = await res.gateway({
      broker,
      userInbox: true,
      userOf: () => undefined,
    });
    expect(await gateway.notifyUser('first', 'msg', [1])).toBe(1);
    const refused = gateway.notifyUser('second', 'msg', [1]);
    await expect(refused).rejects.toMatchObject({
      code: ErrorCode.RateLimited,
      message: 'Too many new topics: the message was not sent',
      data: { newTopicsPerSecond: 0.001 },
    });
    // The first user's inbox exists: within the budget whatever it holds.
    expect(await gateway.notifyUser('first', 'msg', [2])).toBe(2);
  });
});
