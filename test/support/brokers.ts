import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { canConnect } from './network.js';

export const REDIS_URL = 'redis://127.0.0.1:6379';

export const NATS_URL = 'nats://127.0.0.1:4222';

export type BrokerKind = 'redis' | 'nats';

/** Which of the session's brokers answer on their standard ports (CI runs them both). */
export async function brokersUp(): Promise<Record<BrokerKind, boolean>> {
  return { redis: await canConnect(6379), nats: await canConnect(4222) };
}

/**
 * Delete every key under `prefix:` (as brokerFromEnv prefixes Redis keys). Returns how many.
 * `prefix` is given without the colon: one given with it (a RedisBroker's own `x:`) would
 * match `x::*`, delete nothing and leave the keys on the shared server, so it is refused.
 */
export async function deleteRedisKeys(url: string, prefix: string): Promise<number> {
  if (prefix.endsWith(':')) {
    const base = prefix.slice(0, -1);
    throw new Error(
      `deleteRedisKeys takes the prefix without its ":" ("${base}" for the keys "${base}:*"), not "${prefix}"`,
    );
  }
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  let deleted = 0;
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) deleted += await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** Run `fn` with a Redis connection. */
export async function withRedis<T>(url: string, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * Delete every JetStream stream of a NatsBroker's `prefix`: its topic streams (`<prefix>_...`)
 * and its key-value buckets' (`KV_<prefix>-...`: idempotency keys, deny lists, presence).
 */
export async function deleteNatsStreams(prefix: string): Promise<number> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    const ours: string[] = [];
    for await (const name of jsm.streams.names())
      if (name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix}-`)) ours.push(name);
    await Promise.all(ours.map((name) => jsm.streams.delete(name)));
    return ours.length;
  } finally {
    await nc.close();
  }
}

/** The last sequence number of a JetStream stream. */
export async function natsLastSeq(stream: string): Promise<number> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    return (await jsm.streams.info(stream)).state.last_seq;
  } finally {
    await nc.close();
  }
}

/**
 * The brokers a test file opens on the shared Redis and NATS, each set under a prefix of its own:
 * `open` one, `closeAll` after each test, `deleteAll` (the prefixes' keys and streams) after the
 * file.
 */
export class TestBrokers {
  private readonly opened: Broker[] = [];
  private readonly prefixes: { kind: BrokerKind; prefix: string }[] = [];

  /** A fresh prefix starting with `stem`, deleted by deleteAll. */
  prefix(kind: BrokerKind, stem: string): string {
    const prefix = `${stem}${Math.random().toString(16).slice(2, 12)}`;
    this.prefixes.push({ kind, prefix });
    return prefix;
  }

  async open(kind: BrokerKind, prefix: string): Promise<Broker> {
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
        : await NatsBroker.connect({ servers: NATS_URL, prefix, timeoutMs: 2_000 });
    this.opened.push(broker);
    return broker;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.opened.splice(0).map((broker) => broker.close()));
  }

  async deleteAll(): Promise<void> {
    for (const { kind, prefix } of this.prefixes.splice(0)) {
      if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
      else await deleteNatsStreams(prefix).catch(() => 0);
    }
  }
}
