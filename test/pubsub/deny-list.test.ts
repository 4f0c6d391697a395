/**
 * The deny list of revoked users in each broker (Broker.deny, Broker.denied): an entry holds
 * the newest revocation time and the latest end of the revocations of its user, lapses at that
 * end, and the list is bounded (MemoryBroker, NATS: lapsed entries dropped to make room, then
 * refused when full, nothing live dropped; Redis: each key expires with its entry). A model test checks random revocations, reads and time
 * passing against a Map on MemoryBroker (a clock of the test's) and on Redis (real time).
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import fc from 'fast-check';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { DenyListFullError, MAX_DENY_FOR_MS } from '../../src/pubsub/deny-list.js';
import { natsDenyNames } from '../../src/pubsub/deny-list-nats.js';
import { redisDenyKey } from '../../src/pubsub/deny-list-redis.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { NATS_URL, REDIS_URL, deleteRedisKeys, withRedis } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const redisPrefix = `wsrpc-test-deny-${randomBytes(5).toString('hex')}`;
const natsPrefix = `wsrpcdeny${randomBytes(5).toString('hex')}`;

const brokers: Broker[] = [];
afterEach(async () => {
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  if (redisUp) await deleteRedisKeys(REDIS_URL, redisPrefix);
  if (natsUp) await deleteNatsBucket(natsPrefix).catch(() => undefined);
});

async function deleteNatsBucket(prefix: string): Promise<void> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(natsDenyNames(prefix, 'x').stream);
  } finally {
    await nc.close();
  }
}

async function redisBroker(): Promise<RedisBroker> {
  const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${redisPrefix}:` });
  brokers.push(broker);
  return broker;
}

async function natsBroker(maxDeniedUsers?: number, prefix = natsPrefix): Promise<NatsBroker> {
  const broker = await NatsBroker.connect({ servers: NATS_URL, prefix, maxDeniedUsers });
  brokers.push(broker);
  return broker;
}

function user(): string {
  return `user ${randomBytes(4).toString('hex')} é.*>`;
}

describe('MemoryBroker deny list', () => {
  it('lists a user until the entry lapses, keeping the newest revocation and the latest end', async () => {
    let now = 1_000_000;
    const broker = new MemoryBroker({ now: () => now });
    expect(await broker.denied('ann')).toBeUndefined();
    await broker.deny('ann', 999_000, 5_000);
    expect(await broker.denied('ann')).toEqual({ revokedAt: 999_000, until: 1_005_000 });
    // A later, shorter revocation moves revokedAt on and leaves the end where it was.
    now += 1_000;
    await broker.deny('ann', 1_000_500, 1_000);
    expect(await broker.denied('ann')).toEqual({ revokedAt: 1_000_500, until: 1_005_000 });
    now = 1_004_999;
    expect(await broker.denied('ann')).toBeDefined();
    now = 1_005_000;
    expect(await broker.denied('ann')).toBeUndefined();
  });

  it('refuses a revocation beyond maxDeniedUsers, and takes it once an entry lapsed', async () => {
    let now = 0;
    const broker = new MemoryBroker({ now: () => now, maxDeniedUsers: 3 });
    await broker.deny('a', 0, 100);
    await broker.deny('b', 0, 1_000);
    await broker.deny('c', 0, 1_000);
    await expect(broker.deny('d', 0, 1_000)).rejects.toThrow(DenyListFullError);
    await expect(broker.deny('d', 0, 1_000)).rejects.toThrow(/at most 3 users/);
    // A user already listed is still revoked again.
    await broker.deny('b', 5, 2_000);
    expect(await broker.denied('b')).toEqual({ revokedAt: 5, until: 2_000 });
    now = 100; // `a` lapsed: its room is taken back.
    await broker.deny('d', 100, 1_000);
    expect(await broker.denied('d')).toEqual({ revokedAt: 100, until: 1_100 });
    expect(await broker.denied('a')).toBeUndefined();
  });

  it('rejects once closed', async () => {
    const broker = new MemoryBroker();
    await broker.close();
    await expect(broker.deny('a', 0, 10)).rejects.toThrow(/closed/);
    await expect(broker.denied('a')).rejects.toThrow(/closed/);
  });
});

describe.skipIf(!redisUp && !mustRun)('RedisBroker deny list', () => {
  it('keeps one key per user that expires with the entry (PX)', async () => {
    const broker = await redisBroker();
    const name = user();
    const revokedAt = Date.now();
    // Long enough that no delay of a loaded machine sees it expire before it is read.
    await broker.deny(name, revokedAt, 60_000);
    const key = redisDenyKey(`${redisPrefix}:`, name);
    const pttl = await withRedis(REDIS_URL, (redis) => redis.pttl(key));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect((await broker.denied(name))?.revokedAt).toBe(revokedAt);
    // A shorter revocation later: the newer time, the longer expiry kept.
    await broker.deny(name, revokedAt + 1, 50);
    expect((await broker.denied(name))?.revokedAt).toBe(revokedAt + 1);
    expect(await withRedis(REDIS_URL, (redis) => redis.pttl(key))).toBeGreaterThan(50);
    // An entry of 300 ms goes with its key.
    const brief = user();
    await broker.deny(brief, revokedAt, 300);
    const briefKey = redisDenyKey(`${redisPrefix}:`, brief);
    expect(await withRedis(REDIS_URL, (redis) => redis.pttl(briefKey))).toBeLessThanOrEqual(300);
    await waitFor(async () => (await broker.denied(brief)) === undefined, 'the entry to expire');
    expect(await withRedis(REDIS_URL, (redis) => redis.exists(briefKey))).toBe(0);
  });
});

describe.skipIf(!natsUp && !mustRun)('NatsBroker deny list', () => {
  it('keeps entries in a KV bucket whose max age is the longest revocation, each lapsing on read', async () => {
    const broker = await natsBroker();
    const name = user();
    expect(await broker.denied(name)).toBeUndefined(); // no bucket yet: read makes none
    const revokedAt = Date.now();
    await broker.deny(name, revokedAt, 300);
    expect((await broker.denied(name))?.revokedAt).toBe(revokedAt);
    await broker.deny(name, revokedAt + 1, 50);
    const merged = await broker.denied(name);
    expect(merged?.revokedAt).toBe(revokedAt + 1);
    expect(merged!.until - revokedAt).toBeGreaterThanOrEqual(300);
    const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
    try {
      const info = await (
        await jetstreamManager(nc)
      ).streams.info(natsDenyNames(natsPrefix, name).stream);
      expect(info.config.max_age).toBe(MAX_DENY_FOR_MS * 1e6);
      expect(info.config.max_msgs_per_subject).toBe(1);
    } finally {
      await nc.close();
    }
    await sleep(350);
    expect(await broker.denied(name)).toBeUndefined();
  });

  it('refuses a revocation beyond maxDeniedUsers; a listed user is revoked again', async () => {
    const prefix = `${natsPrefix}b`;
    try {
      const broker = await natsBroker(2, prefix);
      await broker.deny('a', 1, 60_000);
      await broker.deny('b', 1, 60_000);
      await expect(broker.deny('c', 1, 60_000)).rejects.toThrow(DenyListFullError);
      await broker.deny('a', 2, 60_000);
      expect((await broker.denied('a'))?.revokedAt).toBe(2);
      expect(await broker.denied('c')).toBeUndefined();
    } finally {
      await deleteNatsBucket(prefix).catch(() => undefined);
    }
  });

  it('makes room by dropping lapsed entries only: a user revoked again since stays', async () => {
    const prefix = `${natsPrefix}l`;
    try {
      const broker = await natsBroker(2, prefix);
      const now = Date.now();
      await broker.deny('a', now, 200);
      await broker.deny('b', now, 200);
      await waitFor(
        async () => (await broker.denied('a')) === undefined && !(await broker.denied('b')),
        'the lapses',
      );
      // a revoked again: written over, live; b lapsed, its room taken back for c.
      await broker.deny('a', now + 1, 60_000);
      await broker.deny('c', now, 60_000);
      expect((await broker.denied('a'))?.revokedAt).toBe(now + 1);
      expect((await broker.denied('c'))?.revokedAt).toBe(now);
      // Full of live entries: refused, nothing dropped.
      await expect(broker.deny('d', now, 60_000)).rejects.toThrow(DenyListFullError);
      expect((await broker.denied('a'))?.revokedAt).toBe(now + 1);
    } finally {
      await deleteNatsBucket(prefix).catch(() => undefined);
    }
  });

  it('two nodes revoking one user at once: both revocations count', async () => {
    const [one, two] = [await natsBroker(), await natsBroker()];
    const name = user();
    const now = Date.now();
    await Promise.all([
      one.deny(name, now + 1, 60_000),
      two.deny(name, now + 2, 120_000),
      one.deny(name, now, 30_000),
    ]);
    const denial = await two.denied(name);
    expect(denial?.revokedAt).toBe(now + 2);
    expect(denial!.until).toBeGreaterThanOrEqual(now + 120_000);
  });
});

// --- model test ---------------------------------------------------------------------------

/**
 * A deny's revocation time is `at` ms from a time that moves on by one per deny: it may be older
 * than the user's entry holds (another node's revocation, made earlier or on a clock behind).
 */
type Op =
  | { kind: 'deny'; user: number; forMs: number; at: number }
  | { kind: 'check'; user: number }
  | { kind: 'pass'; ms: number };

const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('deny' as const),
    user: fc.nat(3),
    forMs: fc.constantFrom(40, 90, 200),
    at: fc.integer({ min: -3, max: 3 }),
  }),
  fc.record({ kind: fc.constant('check' as const), user: fc.nat(3) }),
  fc.record({ kind: fc.constant('pass' as const), ms: fc.constantFrom(0, 15, 50, 120) }),
);

/**
 * Run `ops` on `broker` and on a Map model. `clock` reads the time the broker's entries lapse
 * by, `pass` makes it pass; `fuzzMs` is how close to an entry's end a check may go either way
 * (real time moves between the model's step and the broker's).
 */
async function runModel(
  broker: Broker,
  ops: readonly Op[],
  clock: () => number,
  pass: (ms: number) => Promise<void>,
  fuzzMs: number,
  names: readonly string[],
): Promise<void> {
  // An entry's end lies between `until` (counted from before the deny was sent) and
  // `untilLatest` (from after its answer): a slow round trip moves it, not the rule. Its
  // revocation time is one of `revokedAt` (more than one where a deny came as the entry before
  // it lapsed, and the broker may have kept either).
  const model = new Map<string, { revokedAt: Set<number>; until: number; untilLatest: number }>();
  let base = clock();
  for (const op of ops) {
    if (op.kind === 'pass') {
      await pass(op.ms);
      continue;
    }
    const name = names[op.user]!;
    if (op.kind === 'deny') {
      const revokedAt = ++base + op.at;
      const before = clock();
      await broker.deny!(name, revokedAt, op.forMs);
      const after = clock();
      const live = model.get(name);
      const until = before + op.forMs;
      const untilLatest = after + op.forMs;
      // A live entry is kept if it ends later: surely where it outlives the deny's round trip,
      // perhaps where it ends during it (then only its latest end bounds the new one).
      const surely = live !== undefined && live.until > after + fuzzMs;
      const perhaps = live !== undefined && live.untilLatest > before - fuzzMs;
      // The newer revocation time of the two, where the entry is kept.
      const kept = [...(live?.revokedAt ?? [])].map((time) => Math.max(time, revokedAt));
      model.set(name, {
        revokedAt: new Set(surely ? kept : perhaps ? [revokedAt, ...kept] : [revokedAt]),
        until: surely ? Math.max(live.until, until) : until,
        untilLatest: perhaps ? Math.max(live.untilLatest, untilLatest) : untilLatest,
      });
      continue;
    }
    const expected = model.get(name);
    const now = clock();
    const got = await broker.denied!(name);
    const later = clock();
    if (expected) {
      // At the edge, whichever side of it the broker read: either answer.
      if (expected.until <= later + fuzzMs && expected.untilLatest > now - fuzzMs) continue;
    }
    if (expected && expected.until > later) {
      expect([...expected.revokedAt]).toContain(got?.revokedAt);
      expect(got!.until).toBeGreaterThanOrEqual(expected.until - fuzzMs);
      expect(got!.until).toBeLessThanOrEqual(expected.untilLatest + fuzzMs);
    } else {
      expect(got).toBeUndefined();
    }
  }
}

const redisExamples: [Op[]][] = [
  [
    [
      { kind: 'deny', user: 0, forMs: 200, at: 3 },
      { kind: 'deny', user: 0, forMs: 90, at: -3 },
      { kind: 'check', user: 0 },
    ],
  ],
  [
    [
      { kind: 'deny', user: 1, forMs: 200, at: 0 },
      { kind: 'deny', user: 1, forMs: 40, at: 0 },
      { kind: 'pass', ms: 120 },
      { kind: 'check', user: 1 },
    ],
  ],
];

describe('deny list against a Map model', () => {
  it('MemoryBroker: random revocations, reads and time passing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArbitrary, { maxLength: 40 }), async (ops) => {
        let now = 1_000_000;
        const broker = new MemoryBroker({ now: () => now });
        const names = ['a', 'b', 'c', 'd'];
        await runModel(
          broker,
          ops,
          () => now,
          (ms) => {
            now += ms;
            return Promise.resolve();
          },
          0,
          names,
        );
      }),
      { numRuns: 300 },
    );
  });

  it.skipIf(!redisUp && !mustRun)(
    'RedisBroker: random revocations, reads and time passing',
    async () => {
      const broker = await redisBroker();
      await fc.assert(
        fc.asyncProperty(fc.array(opArbitrary, { maxLength: 25 }), async (ops) => {
          const names = [user(), user(), user(), user()];
          await runModel(broker, ops, Date.now, sleep, 25, names);
        }),
        // Short runs at fast-check's default size: the merges of a user's revocations are rare
        // in them, so one example of each (an older revocation after a newer one; a shorter one
        // after a longer one, read after the shorter's end).
        { numRuns: 12, examples: redisExamples },
      );
    },
    60_000,
  );
});
