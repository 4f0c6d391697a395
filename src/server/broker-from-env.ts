import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import { refuse } from '../peer/option-rules.js';

/** What BROKER and its variables ask for, checked. */
export interface BrokerEnv {
  readonly kind: 'memory' | 'redis' | 'nats';
  /** REDIS_URL or NATS_URL, or its default. */
  readonly url: string;
  readonly prefix: string | undefined;
  readonly historyStorage: 'file' | 'memory' | undefined;
}

/**
 * The broker chosen by configuration: `BROKER=memory|redis|nats`, with
 * `REDIS_URL` (default redis://127.0.0.1:6379) or `NATS_URL` (default
 * nats://127.0.0.1:4222) and `BROKER_PREFIX`; for NATS, `NATS_HISTORY_STORAGE=file|memory`
 * (NatsBrokerOptions.historyStorage). Undefined for memory: the
 * gateway's embedded default. The variables are checked first (brokerEnv). The Redis and NATS
 * clients (optional peer dependencies: `ioredis`, `@nats-io/transport-node` and
 * `@nats-io/jetstream`) load only when chosen; one that is not installed rejects with an error
 * naming it.
 */
export async function brokerFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
  logger?: Logger,
): Promise<Broker | undefined> {
  const { kind, url, prefix, historyStorage } = brokerEnv(env);
  const onError = (err: unknown): void => logger?.warn({ err }, 'broker error (recovering)');
  switch (kind) {
    case 'memory':
      return undefined;
    case 'redis': {
      const { RedisBroker } = await withPeers('redis', ['ioredis'], () => import('../redis.js'));
      return RedisBroker.create({ url, onError, ...(prefix ? { prefix: `${prefix}:` } : {}) });
    }
    case 'nats': {
      const { NatsBroker } = await withPeers(
        'nats',
        ['@nats-io/transport-node', '@nats-io/jetstream'],
        () => import('../nats.js'),
      );
      return NatsBroker.connect({
        servers: url,
        onError,
        ...(prefix ? { prefix } : {}),
        ...(historyStorage && { historyStorage }),
      });
    }
  }
}

/**
 * BROKER and the variables of its kind, checked without loading a client: an error naming the
 * variable (BROKER, REDIS_URL, NATS_URL, NATS_HISTORY_STORAGE) when one is not usable.
 */
export function brokerEnv(env: Readonly<Record<string, string | undefined>>): BrokerEnv {
  const kind = (env['BROKER'] ?? 'memory').toLowerCase();
  if (kind !== 'memory' && kind !== 'redis' && kind !== 'nats') {
    throw new Error(`BROKER must be memory, redis or nats, not "${env['BROKER']}"`);
  }
  const prefix = env['BROKER_PREFIX'];
  if (kind === 'memory') return { kind, url: '', prefix, historyStorage: undefined };
  const urlName = kind === 'redis' ? 'REDIS_URL' : 'NATS_URL';
  const url = env[urlName] ?? (kind === 'redis' ? 'redis://127.0.0.1:6379' : DEFAULT_NATS_URL);
  checkBrokerUrl(kind, url, urlName);
  const historyStorage = (kind === 'nats' && env['NATS_HISTORY_STORAGE']) || undefined;
  if (historyStorage !== undefined && historyStorage !== 'file' && historyStorage !== 'memory')
    throw new Error(`NATS_HISTORY_STORAGE must be file or memory, not "${historyStorage}"`);
  return { kind, url, prefix, historyStorage };
}

const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/**
 * The schemes of a broker's URL: the NATS client for Node speaks the NATS protocol, in clear or
 * TLS, never over WebSocket.
 */
const URL_SCHEMES = {
  redis: [/^rediss?:\/\//i, 'a redis:// or rediss:// URL'],
  nats: [/^(nats|tls):\/\//i, 'a nats:// or tls:// URL'],
} as const;

/**
 * Refuse a broker URL of `kind` that its client cannot use, naming it `name` (`broker.url` in
 * a configuration file, REDIS_URL or NATS_URL here): the scheme, and a URL the parser takes;
 * for NATS, each server of a comma-separated list. The URL is shown masked (refuse under a name
 * ending in URL).
 */
export function checkBrokerUrl(kind: 'redis' | 'nats', url: string, name: string): void {
  const [scheme, what] = URL_SCHEMES[kind];
  const servers = kind === 'nats' ? url.split(',').map((server) => server.trim()) : [url];
  for (const server of servers) {
    if (!scheme.test(server) || !URL.canParse(server)) refuse(name, what, server, true);
  }
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
