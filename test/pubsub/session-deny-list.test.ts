/**
 * The revoked sessions each broker keeps per node (Broker.denySession, Broker.deniedSessions):
 * a node reads its own records in one read, a record keeps the newest revocation with its
 * reason (cut to 123 bytes) and the latest end, lapses at that end, and the records are bounded
 * (MemoryBroker and NATS in all, Redis per node): past the bound a revocation is refused with
 * SessionDenyListFullError, nothing live dropped (every broker drops lapsed records to make
 * room).
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { MAX_DENY_FOR_MS } from '../../src/pubsub/deny-list.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { SessionDenyListFullError } from '../../src/pubsub/session-deny-list.js';
import type { SessionDenial } from '../../src/pubsub/session-deny-list.js';
import { natsSessionDenyNames } from '../../src/pubsub/session-deny-list-nats.js';
import { redisSessionDenyKeys } from '../../src/pubsub/session-deny-list-redis.js';
import { NATS_URL, REDIS_URL, deleteRedisKeys, withRedis } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const redisPrefix = `wsrpc-test-deny-session-${randomBytes(5).toString('hex')}`;
const natsPrefix = `wsrpcdenysession${randomBytes(5).toString('hex')}`;
const natsPrefixes = new Set<string>();

const brokers: Broker[] = [];
afterEach(async () => {
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  if (redisUp) await deleteRedisKeys(REDIS_URL, redisPrefix);
  if (natsUp) {
    for (const prefix of natsPrefixes) await deleteNatsBucket(prefix).catch(() => undefined);
  }
});

async function deleteNatsBucket(prefix: string): Promise<void> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    await (await jetstreamManager(nc)).streams.delete(natsSessionDenyNames(prefix, 'x').stream);
  } finally {
    await nc.close();
  }
}

async function redisBroker(maxDeniedSessions?: number): Promise<RedisBroker> {
  const prefix = `${redisPrefix}:${randomBytes(3).toString('hex')}:`;
  const broker = await RedisBroker.create({ url: REDIS_URL, prefix, maxDeniedSessions });
  brokers.push(broker);
  return broker;
}

async function natsBroker(maxDeniedSessions?: number): Promise<NatsBroker> {
  const prefix = `${natsPrefix}${randomBytes(3).toString('hex')}`;
  natsPrefixes.add(prefix);
  const broker = await NatsBroker.connect({ servers: NATS_URL, prefix, maxDeniedSessions });
  brokers.push(broker);
  return broker;
}

const sorted = (records: SessionDenial[]): SessionDenial[] =>
  [...records].sort((a, b) => a.session.localeCompare(b.session));

/** What every broker does alike, with revocations long enough not to lapse meanwhile. */
function common(make: (maxDeniedSessions?: number) => Promise<Broker>): void {
  it("reads a node's records, none of another node's, keeping the newest reason", async () => {
    const broker = await make();
    // Node ids with what NATS subjects and Redis keys do not take plainly.
    const [b, c] = ['node b.*>', 'node-c'];
    expect(await broker.deniedSessions!(b)).toEqual([]); // nothing yet: reading makes nothing
    const now = Date.now();
    await broker.denySession!(b, `${b}-s1`, now, 60_000, 'first');
    await broker.denySession!(b, `${b}-s2`, now, 60_000, 'é'.repeat(100));
    await broker.denySession!(c, `${c}-s1`, now, 60_000, 'other');
    // An older revocation arriving late keeps the newer reason; a shorter one, the later end.
    await broker.denySession!(b, `${b}-s1`, now + 5, 1_000, 'second');
    await broker.denySession!(b, `${b}-s1`, now + 1, 1_000, 'late');
    const records = sorted(await broker.deniedSessions!(b));
    expect(
      records.map(({ session, revokedAt, reason }) => ({ session, revokedAt, reason })),
    ).toEqual([
      { session: `${b}-s1`, revokedAt: now + 5, reason: 'second' },
      // Cut to the 123 bytes a close reason holds.
      { session: `${b}-s2`, revokedAt: now, reason: 'é'.repeat(61) },
    ]);
    expect(records[0]!.until).toBeGreaterThanOrEqual(now + 60_000);
    expect((await broker.deniedSessions!(c)).map((r) => r.reason)).toEqual(['other']);
  });

  it('refuses a record past maxDeniedSessions; a recorded session is revoked again', async () => {
    const broker = await make(2);
    const now = Date.now();
    await broker.denySession!('b', 'b-1', now, 60_000, 'r');
    await broker.denySession!('b', 'b-2', now, 60_000, 'r');
    const refused = broker.denySession!('b', 'b-3', now, 60_000, 'r');
    await expect(refused).rejects.toThrow(SessionDenyListFullError);
    await expect(broker.denySession!('b', 'b-3', now, 60_000, 'r')).rejects.toThrow(
      /at most 2 revoked sessions/,
    );
    await broker.denySession!('b', 'b-1', now + 1, 60_000, 'again');
    expect(sorted(await broker.deniedSessions!('b')).map((r) => r.reason)).toEqual(['again', 'r']);
  });

  it('leaves a record out once it lapses', async () => {
    const broker = await make();
    const now = Date.now();
    await broker.denySession!('b', 'b-1', now, 200, 'brief');
    await broker.denySession!('b', 'b-2', now, 60_000, 'long');
    await waitFor(async () => (await broker.deniedSessions!('b')).length === 1, 'the lapse');
    expect((await broker.deniedSessions!('b')).map((r) => r.session)).toEqual(['b-2']);
  });
}

/** A lapsed record's room is taken back for a new one. */
function dropsLapsed(make: (maxDeniedSessions?: number) => Promise<Broker>): void {
  it('drops a record once it lapses, and takes its room back', async () => {
    const broker = await make(1);
    const now = Date.now();
    await broker.denySession!('b', 'b-1', now, 200, 'brief');
    await waitFor(async () => (await broker.deniedSessions!('b')).length === 0, 'the lapse');
    await broker.denySession!('b', 'b-2', now, 60_000, 'next');
    expect((await broker.deniedSessions!('b')).map((r) => r.session)).toEqual(['b-2']);
  });
}

describe('MemoryBroker revoked sessions', () => {
  const memory = (maxDeniedSessions?: number) =>
    Promise.resolve(new MemoryBroker({ maxDeniedSessions }));
  common(memory);
  dropsLapsed(memory);

  it("bounds every node's records together, and rejects once closed", async () => {
    const broker = new MemoryBroker({ maxDeniedSessions: 1 });
    await broker.denySession('b', 'b-1', 0, 60_000, 'r');
    await expect(broker.denySession('c', 'c-1', 0, 60_000, 'r')).rejects.toThrow(
      SessionDenyListFullError,
    );
    await broker.close();
    await expect(broker.denySession('b', 'b-2', 0, 10, 'r')).rejects.toThrow(/closed/);
    await expect(broker.deniedSessions('b')).rejects.toThrow(/closed/);
  });
});

describe.skipIf(!redisUp && !mustRun)('RedisBroker revoked sessions', () => {
  common(redisBroker);
  dropsLapsed(redisBroker);

  it("bounds each node's records apart; the keys expire with the node's latest record", async () => {
    const broker = await redisBroker(1);
    const now = Date.now();
    await broker.denySession('b', 'b-1', now, 60_000, 'r');
    await broker.denySession('c', 'c-1', now, 30_000, 'r');
    const refused = broker.denySession('b', 'b-2', now, 60_000, 'r');
    await expect(refused).rejects.toThrow(/of node "b"/);
    const prefix = (broker as unknown as { prefix: string }).prefix;
    const { set, hash } = redisSessionDenyKeys(prefix, 'b');
    for (const key of [set, hash]) {
      const pttl = await withRedis(REDIS_URL, (redis) => redis.pttl(key));
      expect(pttl).toBeGreaterThan(30_000);
      expect(pttl).toBeLessThanOrEqual(60_000);
    }
  });
});

describe.skipIf(!natsUp && !mustRun)('NatsBroker revoked sessions', () => {
  common(natsBroker);
  dropsLapsed(natsBroker);

  it('makes room by dropping lapsed records only: one revoked again since stays', async () => {
    const broker = await natsBroker(2);
    const now = Date.now();
    await broker.denySession('b', 'b-1', now, 200, 'brief');
    await broker.denySession('b', 'b-2', now, 200, 'brief');
    await waitFor(async () => (await broker.deniedSessions('b')).length === 0, 'the lapses');
    // b-1 revoked again: written over, live; b-2 lapsed, its room taken back for c-1.
    await broker.denySession('b', 'b-1', now + 1, 60_000, 'again');
    await broker.denySession('c', 'c-1', now, 60_000, 'new');
    expect((await broker.deniedSessions('b')).map((r) => r.reason)).toEqual(['again']);
    expect((await broker.deniedSessions('c')).map((r) => r.reason)).toEqual(['new']);
    // Full of live records: refused, nothing dropped.
    await expect(broker.denySession('c', 'c-2', now, 60_000, 'r')).rejects.toThrow(
      SessionDenyListFullError,
    );
    expect((await broker.deniedSessions('b')).map((r) => r.reason)).toEqual(['again']);
  });

  it('keeps the records in a KV bucket, discard new, whose max age is the longest revocation', async () => {
    const broker = await natsBroker(7);
    await broker.denySession('b', 'b-1', Date.now(), 60_000, 'r');
    const prefix = (broker as unknown as { prefix: string }).prefix;
    const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
    try {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(natsSessionDenyNames(prefix, 'b').stream);
      expect(info.config.max_age).toBe(MAX_DENY_FOR_MS * 1e6);
      expect(info.config.max_msgs).toBe(7);
      expect(info.config.max_msgs_per_subject).toBe(1);
      expect(info.config.discard).toBe('new');
      expect(info.config.subjects).toEqual([`$KV.${prefix}-deny-session.>`]);
    } finally {
      await nc.close();
    }
  });
});
