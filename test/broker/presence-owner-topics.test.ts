/**
 * The list of topics a presence owner (a node) has members in, which release and reaping walk,
 * is as long as what the owner holds: a topic leaves it with the owner's last member there.
 * Writes of one owner sent at once, without waiting for each other, against a model (the
 * Redis store unlists a topic in a second script, after the write that emptied it); and a
 * gateway whose client joins and leaves many presence topics, on MemoryBroker and Redis.
 */
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { nanoid } from 'nanoid';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { MemoryPresenceStore } from '../../src/pubsub/presence.js';
import type { PresenceEntry, PresenceStore } from '../../src/pubsub/presence.js';
import { RedisPresenceStore, redisPresenceKeys } from '../../src/pubsub/presence-redis.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { RedisScriptRunner } from '../../src/pubsub/redis-script-runner.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { sleep } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { settle } from '../support/waiting.js';

const TOPICS = ['room.a', 'room.b'];
const OWNER = 'node-1';
const LIVE_LEASE_MS = 60_000;
const prefix = `presence-owner-topics-${nanoid(6)}`;

const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0 });
redis.on('error', () => undefined);
afterAll(async () => {
  redis.disconnect();
  await deleteRedisKeys(REDIS_URL, prefix);
});

interface Write {
  topic: number;
  join: boolean;
  member: number;
}

const write: fc.Arbitrary<Write> = fc.record({
  topic: fc.nat(1),
  join: fc.boolean(),
  member: fc.nat(2),
});

function entry(member: number): PresenceEntry {
  return { key: `s${member}/0x1`, sessionId: `s${member}` };
}

/**
 * Send every write of `batches` at once within a batch, batch after batch; then the owner's list
 * is the topics the model has members in, and a reap after its lease lapses removes all of them
 * and leaves the list empty.
 */
async function check(
  store: PresenceStore,
  listed: () => Promise<string[]>,
  lapse: () => Promise<void>,
  batches: Write[][],
): Promise<void> {
  // One owner's writes to a topic apply in the order they were made.
  const model = new Map<string, Set<string>>(TOPICS.map((t) => [t, new Set()]));
  for (const batch of batches) {
    await Promise.all(
      batch.map((w) => {
        const topic = TOPICS[w.topic]!;
        const member = entry(w.member);
        if (w.join) model.get(topic)!.add(member.key);
        else model.get(topic)!.delete(member.key);
        return w.join
          ? store.write(topic, OWNER, [member], [], LIVE_LEASE_MS)
          : store.write(topic, OWNER, [], [member.key], LIVE_LEASE_MS);
      }),
    );
    const held = TOPICS.filter((t) => model.get(t)!.size > 0);
    expect((await listed()).sort()).toEqual(held);
    for (const topic of TOPICS) expect(await store.count(topic)).toBe(model.get(topic)!.size);
  }
  await store.renew(OWNER, 1);
  await lapse();
  const reaped = new Map((await store.reap()).map((r) => [r.topic, r.members.map((m) => m.key)]));
  for (const topic of TOPICS) {
    expect((reaped.get(topic) ?? []).sort()).toEqual([...model.get(topic)!].sort());
    expect(await store.count(topic)).toBe(0);
  }
  expect(await listed()).toEqual([]);
}

const batches = fc.array(fc.array(write, { minLength: 1, maxLength: 8 }), { maxLength: 6 });

describe('one owner’s writes sent at once, against a model', () => {
  it('MemoryPresenceStore', async () => {
    await fc.assert(
      fc.asyncProperty(batches, async (writes) => {
        let now = 1_000;
        const store = new MemoryPresenceStore(() => now);
        const owned = (
          store as unknown as { ownedTopics: Map<string, { keys(): Iterable<string> }> }
        ).ownedTopics;
        await check(
          store,
          () => Promise.resolve([...(owned.get(OWNER)?.keys() ?? [])]),
          () => {
            now += 2;
            return Promise.resolve();
          },
          writes,
        );
      }),
      { numRuns: 200 },
    );
  });

  it('RedisPresenceStore', async () => {
    await redis.connect();
    const runner = new RedisScriptRunner(redis, (cause) => cause);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(batches, async (writes) => {
        // A prefix per run: each starts from an empty store.
        const runPrefix = `${prefix}:${++run}:`;
        const ownerTopics = redisPresenceKeys(runPrefix).ownerTopics(OWNER);
        await check(
          new RedisPresenceStore(runner, runPrefix),
          () => redis.smembers(ownerTopics),
          () => sleep(3),
          writes,
        );
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});

describe('a client joining and leaving many presence topics', () => {
  const res = new Resources();
  const brokers: Broker[] = [];
  afterEach(async () => {
    await res.cleanup();
    await Promise.all(brokers.splice(0).map((b) => b.close()));
  });

  const TOPIC_COUNT = 40;

  /** Join and leave `room.<i>` for each i, one at a time; then the client goes. */
  async function churn(broker: Broker): Promise<void> {
    brokers.push(broker);
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('room.*', { presence: true });
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    for (let i = 0; i < TOPIC_COUNT; i++) {
      const joined = await raw.request('subscribe', [`room.${i}`]);
      expect(joined.result).toEqual(expect.any(String));
      expect((await raw.request('unsubscribe', [joined.result])).result).toBe(true);
    }
    raw.socket.close();
    await raw.closed;
    await settle(async () => {
      for (let i = 0; i < TOPIC_COUNT; i++) {
        if ((await gateway.presence(`room.${i}`).count()) > 0) return false;
      }
      return true;
    });
  }

  it('MemoryBroker: the node’s list of topics empties', async () => {
    const broker = new MemoryBroker();
    await churn(broker);
    const owned = (
      broker.presence as unknown as { ownedTopics: Map<string, { keys(): Iterable<string> }> }
    ).ownedTopics;
    const listed = () => [...owned.values()].flatMap((topics) => [...topics.keys()]);
    await settle(() => listed().length === 0);
    expect(listed()).toEqual([]);
  });

  it('RedisBroker: the node’s topic set is gone', async () => {
    if (redis.status !== 'ready') await redis.connect();
    const brokerPrefix = `${prefix}:gateway:`;
    await churn(await RedisBroker.create({ url: REDIS_URL, prefix: brokerPrefix }));
    const ownerSets = async () => {
      const keys = await redis.keys(`${brokerPrefix}{presence}:owner:*`);
      return Promise.all(keys.map(async (key) => [key, await redis.scard(key)]));
    };
    await settle(async () => (await ownerSets()).length === 0);
    expect(await ownerSets()).toEqual([]);
    // Nothing of the topics is left either.
    expect(await redis.keys(`${brokerPrefix}{room.*`)).toEqual([]);
  });
});
