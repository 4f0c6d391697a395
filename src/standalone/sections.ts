// The sections of a configuration file that the standalone server itself reads: where it
// listens, TLS files, the broker, declared topics, static files, the drain on shutdown and the
// JWT identity. Each resolver refuses a bad value with a TypeError or RangeError naming its full
// path in the file, in the style of the library's options (src/peer/option-rules.ts).
import {
  checkOptions,
  cut,
  either,
  numberIn,
  oneOf,
  ofType,
  refuse,
} from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import type { SlowConsumerPolicy } from '../pubsub/delivery.js';
import { MAX_PRESENCE_PAGE } from '../pubsub/presence.js';
import { checkBrokerUrl } from '../server/broker-from-env.js';
import { resolveJwtOptions } from '../server/jwt/jwt-options.js';
import type { JwtAuthOptions } from '../server/jwt/jwt-options.js';
import { checkJwtKey } from './jwt-key-check.js';

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;

const nonEmpty: Rule = (value, path) => {
  if (typeof value !== 'string' || value === '') refuse(path, 'a non-empty string', value);
};
const port = numberIn(0, 65_535, true, ' (0: any free port)');

export interface ListenConfig {
  /** Default "0.0.0.0". */
  readonly host: string;
  /** Default 8080. */
  readonly port: number;
  /** NDJSON over TCP (TLS with `tls`) on this port; none by default. */
  readonly tcpPort: number | undefined;
}

export const listenDefaults: ListenConfig = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  tcpPort: undefined,
});

export function resolveListen(value: unknown): ListenConfig {
  const given = checkOptions(value, { host: nonEmpty, port, tcpPort: port }, 'listen.', 'listen');
  return Object.freeze({ ...listenDefaults, ...given }) as ListenConfig;
}

export interface TlsFilesConfig {
  /** PEM certificate (chain) file: the server's certificate, then any intermediate ones. */
  readonly certFile: string;
  /** PEM private key file. */
  readonly keyFile: string;
  /**
   * PEM file of the CAs whose client certificates are trusted: with it, mutual TLS, where every
   * connection must present a certificate one of them signed (refused in the handshake if not).
   */
  readonly caFile: string | undefined;
  readonly passphrase: string | undefined;
}

export function resolveTls(value: unknown): TlsFilesConfig | undefined {
  if (value === undefined) return undefined;
  const rules = { certFile: nonEmpty, keyFile: nonEmpty, caFile: nonEmpty, passphrase: nonEmpty };
  const given = checkOptions(value, rules, 'tls.', 'tls');
  for (const key of ['certFile', 'keyFile']) {
    if (given[key] === undefined) refuse(`tls.${key}`, 'a file name (PEM)', undefined);
  }
  return Object.freeze({ caFile: undefined, passphrase: undefined, ...given }) as TlsFilesConfig;
}

export type BrokerConfig =
  | { readonly kind: 'memory' }
  | {
      readonly kind: 'redis' | 'nats';
      readonly url: string | undefined;
      readonly prefix: string | undefined;
      /** NATS only: NatsBrokerOptions.historyStorage. */
      readonly historyStorage?: 'file' | 'memory';
    };

export function resolveBroker(value: unknown): BrokerConfig {
  const rules = {
    kind: oneOf('memory', 'redis', 'nats'),
    url: nonEmpty,
    prefix: nonEmpty,
    historyStorage: oneOf('file', 'memory'),
  };
  const given = checkOptions(value, rules, 'broker.', 'broker');
  const kind = (given['kind'] ?? 'memory') as BrokerConfig['kind'];
  if (kind !== 'nats' && given['historyStorage'] !== undefined) {
    throw new TypeError(`broker.historyStorage is for kind nats, not for kind ${kind}`);
  }
  if (kind === 'memory') {
    for (const key of ['url', 'prefix']) {
      if (given[key] !== undefined) {
        throw new TypeError(`broker.${key} is for kind redis or nats, not for kind memory`);
      }
    }
    return Object.freeze({ kind });
  }
  const url = given['url'] as string | undefined;
  // As brokerFromEnv checks REDIS_URL and NATS_URL when serve builds the broker from it.
  if (url !== undefined) checkBrokerUrl(kind, url, 'broker.url');
  const historyStorage = given['historyStorage'] as 'file' | 'memory' | undefined;
  return Object.freeze({
    kind,
    url,
    prefix: given['prefix'] as string | undefined,
    ...(historyStorage && { historyStorage }),
  });
}

/** One declared topic (or prefix ending in `*`), as `gateway.topic` takes it. */
export interface TopicConfig {
  readonly history: { readonly maxLength?: number; readonly maxAgeMs?: number } | undefined;
  readonly slowConsumer: SlowConsumerPolicy | undefined;
  readonly highWaterMark: number | undefined;
  /** Who is subscribed, kept for `members` and `$presence` (no info: that takes a function). */
  readonly presence: true | { readonly maxListed?: number } | undefined;
}

const topicRules: Record<keyof TopicConfig, Rule> = {
  history: ofType('object', 'an object { maxLength, maxAgeMs }'),
  slowConsumer: oneOf('drop', 'keep-latest', 'disconnect'),
  highWaterMark: numberIn(1, Number.MAX_SAFE_INTEGER, true),
  presence: either(
    ofType('boolean', 'true or an object { maxListed }'),
    ofType('object', 'true or an object { maxListed }'),
  ),
};
const presenceRules: Record<string, Rule> = {
  maxListed: numberIn(1, MAX_PRESENCE_PAGE, true),
};
const historyRules: Record<string, Rule> = {
  maxLength: numberIn(1, 1_000_000, true),
  maxAgeMs: numberIn(1, MAX_DELAY_MS, true),
};

export function resolveTopics(value: unknown): Readonly<Record<string, TopicConfig>> {
  if (value === undefined) return Object.freeze({});
  ofType(
    'object',
    'an object of topic patterns, such as { "chat.*": { history: { maxLength: 100 } } }',
  )(value, 'topics');
  const topics: Record<string, TopicConfig> = {};
  for (const [pattern, options] of Object.entries(value as Record<string, unknown>)) {
    const path = `topics.${cut(pattern)}`;
    if (pattern === '' || pattern.startsWith('$')) {
      throw new RangeError(
        `${path}: a topic pattern is a name or a prefix ending in "*", not starting with "$"`,
      );
    }
    const given = checkOptions(options ?? {}, topicRules, `${path}.`, path);
    const history = checkOptions(
      given['history'],
      historyRules,
      `${path}.history.`,
      `${path}.history`,
    );
    const presence = given['presence'];
    topics[pattern] = Object.freeze({
      history: given['history'] === undefined ? undefined : Object.freeze(history),
      slowConsumer: given['slowConsumer'] as SlowConsumerPolicy | undefined,
      highWaterMark: given['highWaterMark'] as number | undefined,
      presence:
        presence === true
          ? true
          : typeof presence === 'object'
            ? Object.freeze(
                checkOptions(presence, presenceRules, `${path}.presence.`, `${path}.presence`),
              )
            : undefined,
    });
  }
  return Object.freeze(topics);
}

export interface StaticConfig {
  /** A folder whose files are served at `/` (`index.html` for `/`). */
  readonly dir: string;
}

export function resolveStatic(value: unknown): StaticConfig | undefined {
  if (value === undefined) return undefined;
  const given = checkOptions(value, { dir: nonEmpty }, 'static.', 'static');
  if (given['dir'] === undefined) refuse('static.dir', 'a folder name', undefined);
  return Object.freeze({ dir: given['dir'] as string });
}

export interface ShutdownConfig {
  /** How long a drain on SIGTERM or SIGINT may take. Default 10 000. */
  readonly drainDeadlineMs: number;
}

export function resolveShutdown(value: unknown): ShutdownConfig {
  const rules = { drainDeadlineMs: numberIn(0, MAX_DELAY_MS, true) };
  const given = checkOptions(value, rules, 'shutdown.', 'shutdown');
  return Object.freeze({ drainDeadlineMs: 10_000, ...given }) as ShutdownConfig;
}

/** jwtAuth's data options (no `context` function in a file), checked by jwtAuth's own rules. */
export function resolveJwt(value: unknown): JwtAuthOptions | undefined {
  return resolveJwtSection(value, 'jwt');
}

/**
 * jwtAuth's options at `section` of a file (`jwt`, `serverApi.jwt`): checked by jwtAuth's rules,
 * and their key imported as jwtAuth imports it when serve starts (a PEM or JWK that is no key,
 * a key set's unusable key, algorithms the key does not verify), each message naming the path.
 */
export function resolveJwtSection(value: unknown, section: string): JwtAuthOptions | undefined {
  if (value === undefined) return undefined;
  ofType('object', 'an object of jwtAuth options such as { secret, issuer, audience }')(
    value,
    section,
  );
  if (Object.hasOwn(value as object, 'context')) {
    throw new TypeError(
      `${section}.context is a function: give it in code (jwtAuth), not in a file`,
    );
  }
  try {
    checkJwtKey(resolveJwtOptions(value));
  } catch (err) {
    throw prefixed(err, section);
  }
  return Object.freeze({ ...(value as JwtAuthOptions) });
}

/**
 * The error with `section.` before the option it names (jwtAuth's rules name `secret`, the
 * file's path is `jwt.secret`), or `section: ` before a message that names none.
 */
function prefixed(err: unknown, section: string): Error {
  if (!(err instanceof Error)) return new Error(`${section}: ${String(err)}`);
  const message = err.message.startsWith('jwtAuth ')
    ? `${section}: ${err.message}`
    : `${section}.${err.message}`;
  const copy = new (err instanceof RangeError ? RangeError : TypeError)(message, { cause: err });
  return copy;
}
