import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';

export const REDIS_URL = 'redis://127.0.0.1:6379';

export const NATS_URL = 'nats://127.0.0.1:4222';

export type BrokerKind = 'redis' | 'nats';

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
