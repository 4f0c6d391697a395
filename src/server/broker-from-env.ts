import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';

/**
 * The broker chosen by configuration: `BROKER=memory|redis|nats`, with
 * `REDIS_URL` (default redis://127.0.0.1:6379) or `NATS_URL` (default
 * nats://127.0.0.1:4222) and `BROKER_PREFIX`. Undefined for memory: the
 * gateway's embedded default. The Redis and NATS clients load only when chosen.
 */
export async function brokerFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
  logger?: Logger,
): Promise<Broker | undefined> {
  const kind = (env['BROKER'] ?? 'memory').toLowerCase();
  const prefix = env['BROKER_PREFIX'];
  const onError = (err: unknown): void => logger?.warn({ err }, 'broker error (recovering)');
  switch (kind) {
    case 'memory':
      return undefined;
    case 'redis': {
      const { RedisBroker } = await import('../pubsub/redis-broker.js');
      const url = env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
      return RedisBroker.create({ url, onError, ...(prefix ? { prefix: `${prefix}:` } : {}) });
    }
    case 'nats': {
      const { NatsBroker } = await import('../pubsub/nats-broker.js');
      const servers = env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
      return NatsBroker.connect({ servers, onError, ...(prefix ? { prefix } : {}) });
    }
    default:
      throw new Error(`BROKER must be memory, redis or nats, not "${env['BROKER']}"`);
  }
}
