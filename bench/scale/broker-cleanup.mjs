// What a scale run over several nodes leaves on its broker, removed once its gateway nodes have
// closed: every Redis key under the run's prefix, every NATS stream (topic streams, key-value
// buckets) named with it. The prefix is the run's own (`scale<pid>x<time>`), so nothing else is
// touched. Topic history is kept on purpose by the brokers, so without this each run would leave
// its 10,000 topics behind on the machine's Redis or NATS.
import { NATS_URL, REDIS_URL } from './local-brokers.mjs';

/** Remove what `kind` ('redis' or 'nats') holds under `prefix`; resolves with how many went. */
export async function removeBrokerPrefix({ kind, prefix }) {
  if (kind === 'redis') return removeRedisKeys(prefix);
  if (kind === 'nats') return removeNatsStreams(prefix);
  throw new Error(`unknown broker ${kind}`);
}

async function removeRedisKeys(prefix) {
  const { Redis } = await import('ioredis');
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  let removed = 0;
  try {
    const stream = redis.scanStream({ match: `${prefix}:*`, count: 1_000 });
    for await (const keys of stream) {
      if (keys.length === 0) continue;
      removed += await redis.unlink(...keys);
    }
  } finally {
    await redis.quit();
  }
  return removed;
}

async function removeNatsStreams(prefix) {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: NATS_URL });
  let removed = 0;
  try {
    const jsm = await jetstreamManager(nc);
    const names = [];
    for await (const info of jsm.streams.list()) {
      if (info.config.name.includes(prefix)) names.push(info.config.name);
    }
    for (const name of names) {
      await jsm.streams.delete(name);
      removed++;
    }
  } finally {
    await nc.close();
  }
  return removed;
}
