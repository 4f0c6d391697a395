/**
 * The presence stores against a model: random joins and leaves of several owners (nodes) on a
 * few topics, owners that die (their lease lapses) and are reaped, and a node that closes
 * (release). After every step each topic's count and its member list, read page by page, are
 * the model's, and a reap removes exactly the dead owners' members. MemoryBroker's store,
 * Redis's and NATS's. The memory and Redis stores also list, per owner, the topics it has members
 * in (what release and reaping walk): after every step each owner's list is exactly the topics
 * where the model has a member of it, so it never outgrows what the owner holds. On those two, an
 * owner may also lapse unreaped while its node goes on as the next owner, writing the same
 * members again: they move to the next owner, and a reap of the lapsed one leaves them.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { nanoid } from 'nanoid';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryPresenceStore } from '../../src/pubsub/presence.js';
import type { PresenceEntry, PresenceStore } from '../../src/pubsub/presence.js';
import type { Link } from '../../src/pubsub/nats-link.js';
import { NatsPresenceStore, natsPresenceBucket } from '../../src/pubsub/presence-nats.js';
import { RedisPresenceStore, redisPresenceKeys } from '../../src/pubsub/presence-redis.js';
import { RedisScriptRunner } from '../../src/pubsub/redis-script-runner.js';
import { NATS_URL, REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { sleep } from '../support/promises.js';

const OWNERS = ['n1', 'n2', 'n3'];
const TOPICS = ['room.a', 'room.b'];
const LIVE_LEASE_MS = 60_000;

type Step =
  | { kind: 'join'; owner: number; topic: number; member: number }
  | { kind: 'leave'; owner: number; topic: number; member: number }
  | { kind: 'die'; owner: number }
  | { kind: 'lapse'; owner: number }
  | { kind: 'close'; owner: number };

const baseStep: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('join' as const),
      owner: fc.nat(2),
      topic: fc.nat(1),
      member: fc.nat(5),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('leave' as const),
      owner: fc.nat(2),
      topic: fc.nat(1),
      member: fc.nat(5),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('die' as const), owner: fc.nat(2) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), owner: fc.nat(2) }) },
);

/**
 * Also a node's owner that lapses and is not reaped yet while the node goes on under its next
 * owner, which writes the same members again: a member key held by the lapsed owner moves to
 * the next one (not the NATS store's: it keeps a member per owner).
 */
const movingStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 11, arbitrary: baseStep },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('lapse' as const), owner: fc.nat(2) }) },
);

/**
 * The key case: a member taken over by the lapsed owner's next one, then a reap (of another
 * owner's death) that takes the lapsed owner: the member stays, the next owner's.
 */
const movedThenReaped: [Step[], number] = [
  [
    { kind: 'join', owner: 1, topic: 0, member: 2 },
    { kind: 'lapse', owner: 1 },
    { kind: 'join', owner: 1, topic: 0, member: 2 },
    { kind: 'die', owner: 0 },
  ],
  1,
];

/** Full-length runs: at fast-check's default size a run is ~5 steps. */
const steps = (step: fc.Arbitrary<Step>, maxLength: number) =>
  fc.array(step, { maxLength, size: 'max' });

interface Harness {
  store: PresenceStore;
  /** Let time pass beyond a 1 ms lease. */
  pass: () => Promise<void>;
  /**
   * The topics the store lists for `owner`, and those where it keeps a set of the owner's
   * members (the same on the memory store); undefined where the store keeps no such list.
   */
  owned?: (owner: string) => Promise<{ listed: string[]; holding: string[] }>;
  /**
   * A lapsed owner's list keeps the topics of members its next owner took over until it is
   * reaped (Redis: the reap leaves those to the next owner; the lapsed one writes no more).
   */
  lapsedListsKept?: boolean;
}

/** The topics where `model` has a member of `owner`. */
function heldBy(model: Model, owner: string): string[] {
  return [...model.topics]
    .filter(([, members]) => [...members.values()].includes(owner))
    .map(([topic]) => topic)
    .sort();
}

/** MemoryPresenceStore's per-owner list, read from its private field. */
function memoryOwned(store: MemoryPresenceStore) {
  const owned = (store as unknown as { ownedTopics: Map<string, { keys(): Iterable<string> }> })
    .ownedTopics;
  return (owner: string) => {
    const topics = [...(owned.get(owner)?.keys() ?? [])].sort();
    return Promise.resolve({ listed: topics, holding: topics });
  };
}

/** RedisPresenceStore's per-owner list and per-topic owner sets under `prefix`. */
function redisOwned(redis: Redis, prefix: string) {
  const keys = redisPresenceKeys(prefix);
  return async (owner: string) => {
    const listed = (await redis.smembers(keys.ownerTopics(owner))).sort();
    const holding: string[] = [];
    for (const topic of TOPICS) {
      if ((await redis.exists(keys.topic(topic, owner)[2]!)) === 1) holding.push(topic);
    }
    return { listed, holding };
  };
}

/** The model: member key -> owner, by topic; and each owner's incarnation (a new one after death). */
class Model {
  readonly topics = new Map<string, Map<string, string>>(TOPICS.map((t) => [t, new Map()]));
  readonly generation = OWNERS.map(() => 0);
  /** Owners whose lease was left to lapse, not reaped yet (their node went on as the next). */
  lapsed: string[] = [];

  owner(index: number): string {
    return `${OWNERS[index]}.${this.generation[index]}`;
  }

  remove(owner: string): Map<string, string[]> {
    const removed = new Map<string, string[]>();
    for (const [topic, members] of this.topics) {
      for (const [key, holder] of members) {
        if (holder !== owner) continue;
        members.delete(key);
        removed.set(topic, [...(removed.get(topic) ?? []), key]);
      }
    }
    return removed;
  }
}

/** A member of a node's session: the node's next owner writes it under the same key. */
function entry(node: string, member: number): PresenceEntry {
  const sessionId = `${node}-s${member}`;
  return { key: `${sessionId}/0x1`, sessionId, user: `u${member}`, info: { n: member } };
}

async function allMembers(store: PresenceStore, topic: string, limit: number): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const page = await store.members(topic, cursor, limit);
    expect(page.members.length).toBeLessThanOrEqual(limit);
    keys.push(...page.members.map((m) => m.key));
    cursor = page.cursor;
    if (cursor === undefined) return keys;
  }
  throw new Error('more pages than members');
}

async function run(harness: () => Harness, steps: Step[], limit: number): Promise<void> {
  const { store, pass, owned, lapsedListsKept } = harness();
  const model = new Model();
  const everyOwner = new Set<string>();
  for (const s of steps) {
    const owner = model.owner(s.owner);
    everyOwner.add(owner);
    if (s.kind === 'join' || s.kind === 'leave') {
      const topic = TOPICS[s.topic]!;
      const member = entry(OWNERS[s.owner]!, s.member);
      const members = model.topics.get(topic)!;
      if (s.kind === 'join') {
        await store.write(topic, owner, [member], [], LIVE_LEASE_MS);
        members.set(member.key, owner);
      } else {
        // A leave removes a member only if this owner holds it.
        await store.write(topic, owner, [], [member.key], LIVE_LEASE_MS);
        if (members.get(member.key) === owner) members.delete(member.key);
      }
    } else if (s.kind === 'die') {
      // Its lease shortened to 1 ms and left to lapse; the live owners hold theirs for a minute.
      const held = await store.renew(owner, 1);
      await pass();
      const reaped = await store.reap();
      // It and every lapsed owner: exactly the members each still holds.
      const expected = new Map<string, string[]>();
      for (const gone of [owner, ...model.lapsed.splice(0)]) {
        for (const [t, keys] of model.remove(gone)) {
          expected.set(t, [...(expected.get(t) ?? []), ...keys]);
        }
      }
      const got = new Map<string, string[]>();
      for (const r of reaped) {
        got.set(r.topic, [...(got.get(r.topic) ?? []), ...r.members.map((m) => m.key)]);
      }
      expect(new Map([...got].map(([t, keys]) => [t, keys.sort()]))).toEqual(
        new Map([...expected].map(([t, keys]) => [t, keys.sort()])),
      );
      if (held) expect(await store.renew(owner, LIVE_LEASE_MS)).toBe(false);
      model.generation[s.owner]!++;
    } else if (s.kind === 'lapse') {
      // Its lease left to lapse unreaped; the node goes on as its next owner.
      await store.renew(owner, 1);
      model.lapsed.push(owner);
      model.generation[s.owner]!++;
    } else {
      await store.release(owner);
      model.remove(owner);
      model.generation[s.owner]!++;
    }
    for (const [topic, members] of model.topics) {
      expect(await store.count(topic)).toBe(members.size);
      expect((await allMembers(store, topic, limit)).sort()).toEqual([...members.keys()].sort());
    }
    if (owned) {
      for (const name of everyOwner) {
        const expected = heldBy(model, name);
        const got = await owned(name);
        if (lapsedListsKept && model.lapsed.includes(name)) {
          expect(got.listed).toEqual(got.holding);
          expect(got.listed).toEqual(expect.arrayContaining(expected));
        } else expect(got).toEqual({ listed: expected, holding: expected });
      }
    }
  }
  for (const index of OWNERS.keys()) await store.release(model.owner(index));
}

describe('presence store, against a model', () => {
  it('MemoryPresenceStore', async () => {
    await fc.assert(
      fc.asyncProperty(steps(movingStep, 40), fc.integer({ min: 1, max: 4 }), (steps, limit) => {
        let now = 1_000;
        return run(
          () => {
            const store = new MemoryPresenceStore(() => now);
            return {
              store,
              pass: () => {
                now += 2;
                return Promise.resolve();
              },
              owned: memoryOwned(store),
            };
          },
          steps,
          limit,
        );
      }),
      { numRuns: 200, examples: [movedThenReaped] },
    );
  });

  describe('RedisPresenceStore', () => {
    const prefix = `presence-model-${nanoid(6)}`;
    const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0 });
    redis.on('error', () => undefined);
    afterAll(async () => {
      redis.disconnect();
      await deleteRedisKeys(REDIS_URL, prefix);
    });

    it('holds the same members as the model', async () => {
      await redis.connect();
      const runner = new RedisScriptRunner(redis, (cause) => cause);
      let run_ = 0;
      await fc.assert(
        fc.asyncProperty(steps(movingStep, 25), fc.integer({ min: 1, max: 4 }), (steps, limit) =>
          run(
            () => {
              // A prefix per run: each starts from an empty store.
              const runPrefix = `${prefix}:${++run_}:`;
              return {
                store: new RedisPresenceStore(runner, runPrefix),
                pass: () => sleep(3),
                owned: redisOwned(redis, runPrefix),
                lapsedListsKept: true,
              };
            },
            steps,
            limit,
          ),
        ),
        { numRuns: 40, examples: [movedThenReaped] },
      );
    }, 120_000);
  });

  describe('NatsPresenceStore', () => {
    const prefixes: string[] = [];
    let link: Link | undefined;
    afterAll(async () => {
      if (!link) return;
      for (const prefix of prefixes) {
        await link.jsm.streams.delete(natsPresenceBucket(prefix).stream).catch(() => false);
      }
      await link.nc.close();
    });

    it('holds the same members as the model', async () => {
      const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
      const current: Link = { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
      link = current;
      const base = `presence-model-${nanoid(6)}`;
      await fc.assert(
        fc.asyncProperty(steps(baseStep, 25), fc.integer({ min: 1, max: 4 }), (steps, limit) => {
          // A bucket per run: each starts from an empty store.
          const prefix = `${base}-${prefixes.length}`;
          prefixes.push(prefix);
          return run(
            () => ({
              store: new NatsPresenceStore(prefix, 1, 5_000, () => current),
              pass: () => sleep(3),
            }),
            steps,
            limit,
          );
        }),
        { numRuns: 30 },
      );
    }, 120_000);
  });
});
