import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import { refuse } from '../peer/option-rules.js';
import { NATS_URL_SCHEME } from '../pubsub/nats-servers.js';

/**
 * The broker chosen by configuration: `BROKER=memory|redis|nats`, with
 * `REDIS_URL` (default redis://127.0.0.1:6379) or `NATS_URL` (default
 * nats://127.0.0.1:4222) and `BROKER_PREFIX`; for NATS, `NATS_HISTORY_STORAGE=file|memory`
 * (NatsBrokerOptions.historyStorage). Undefined for memory: the
 * gateway's embedded default. The Redis and NATS clients (optional peer dependencies: `ioredis`,
 * `@nats-io/transport-node` and `@nats-io/jetstream`) load only when chosen; one that is not
 * installed rejects with an error naming it.
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
      const { RedisBroker } = await withPeers('redis', ['ioredis'], () => import('../redis.js'));
      const url = env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
      checkUrl('REDIS_URL', url, /^rediss?:\/\//i, 'a redis:// or rediss:// URL');
      return RedisBroker.create({ url, onError, ...(prefix ? { prefix: `${prefix}:` } : {}) });
    }
    case 'nats': {
      const { NatsBroker } = await withPeers(
        'nats',
        ['@nats-io/transport-node', '@nats-io/jetstream'],
        () => import('../nats.js'),
      );
      const servers = env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
      for (const server of servers.split(',')) {
        checkUrl('NATS_URL', server.trim(), NATS_URL_SCHEME, 'a nats:// or tls:// URL');
      }
      const historyStorage = env['NATS_HISTORY_STORAGE'] || undefined;
      if (historyStorage !== undefined && historyStorage !== 'file' && historyStorage !== 'memory')
        throw new Error(`NATS_HISTORY_STORAGE must be file or memory, not "${historyStorage}"`);
      return NatsBroker.connect({
        servers,
        onError,
        ...(prefix ? { prefix } : {}),
        ...(historyStorage && { historyStorage }),
      });
    }
    default:
      throw new Error(`BROKER must be memory, redis or nats, not "${env['BROKER']}"`);
  }
}

/**
 * The check a configuration file's broker.url passes: the scheme, and a URL the parser takes.
 * The value is shown masked (refuse under a name ending in URL).
 */
function checkUrl(name: string, url: string, scheme: RegExp, what: string): void {
  if (!scheme.test(url) || !URL.canParse(url)) refuse(name, what, url, true);
}

/**
 * Loads a broker's entry, turning "Cannot find package" for one of its peer dependencies into an
 * error that says what to install.
 */
async function withPeers<T>(kind: string, peers: string[], load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const message = err instanceof Error ? err.message : '';
    const missing = peers.find((peer) => message.includes(`'${peer}'`));
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND' || missing === undefined)
      throw err;
    throw new Error(
      `BROKER=${kind} needs ${missing}, an optional peer dependency of wsrpc-gateway: npm install ${peers.join(' ')}`,
      { cause: err },
    );
  }
}
