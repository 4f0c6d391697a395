// The `serverApi` section of a configuration file (or the object given to startServerApi), checked
// and resolved once: every default stated here, every refusal naming the option's full path.
import { createPublicKey, KeyObject } from 'node:crypto';
import type { JsonWebKey } from 'node:crypto';
import { checkOptions, isRecord, numberIn, ofType, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import { MAX_IDEMPOTENCY_WINDOW_MS } from '../pubsub/broker.js';
import { defaultLimits, resolvePath } from '../server/options.js';

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** API keys shorter than this are refused: a key is a secret, not a password. */
export const MIN_KEY_LENGTH = 16;

/**
 * The server API's own listener, and the bounds of its sockets (the gateway's `limits` of the
 * same names, for this port: on a `path` of the gateway's port the gateway's apply).
 */
export interface ServerApiListen {
  readonly host: string;
  /** 0 picks a free port (the url startServerApi resolves with names it). */
  readonly port: number;
  /**
   * Sockets open at once (requests arriving or answered, idle keep-alive connections), counted
   * before a byte is read; one beyond is destroyed at once.
   */
  readonly maxHttpSockets: number;
  /** The same, from one address (an IPv6 address counts by its /64). */
  readonly maxHttpSocketsPerIp: number;
  /**
   * A connection must have sent its first request's headers this many ms after it opened, or it
   * is destroyed; a later request on a kept-alive connection gets as long (Node's
   * `headersTimeout`). With `bodyTimeoutMs` it bounds a whole request (Node's `requestTimeout`).
   */
  readonly headersTimeoutMs: number;
}

/** The broker-consumed form: API requests taken from a Redis stream or a NATS subject. */
export type ServerApiConsume =
  | {
      readonly kind: 'redis';
      /** The stream's key. */
      readonly stream: string;
      /** The consumer group (one node takes each entry). */
      readonly group: string;
      /** Redis URL; default: the one startServerApi is given (the broker's). */
      readonly url: string | undefined;
      /** Entries handled at once; the rest wait in the stream (XREADGROUP reads the free slots). */
      readonly maxConcurrent: number;
      /**
       * An entry a consumer took and left unacknowledged this long, in ms, is taken over by
       * another (its node died); one being handled is marked not idle every third of it.
       */
      readonly claimIdleMs: number;
      /**
       * An entry taken over after it was delivered this many times (each node that took it
       * died or stalled with it) is not handled again: it goes to `deadLetterStream`.
       */
      readonly maxDeliveries: number;
      /** Where such entries are copied (about DEAD_LETTER_MAX_LENGTH kept); undefined: nowhere. */
      readonly deadLetterStream: string | undefined;
      /** Whether /readyz answers 503 while the consumer is not up. */
      readonly readiness: boolean;
    }
  | {
      readonly kind: 'nats';
      readonly subject: string;
      /** The queue group (one node takes each request). */
      readonly queue: string;
      /** NATS server URL; default: the one startServerApi is given (the broker's). */
      readonly url: string | undefined;
      /** Messages handled at once. */
      readonly maxConcurrent: number;
      /**
       * Messages waiting here for a slot (a core NATS subscription cannot be paused): beyond,
       * a message is refused (-32000 on its reply subject).
       */
      readonly maxQueued: number;
      /** Whether /readyz answers 503 while the consumer is not up. */
      readonly readiness: boolean;
    };

/** The server API's settings, resolved (see resolveServerApiConfig). */
export interface ServerApiConfig {
  /** Its own listener; undefined when `path` puts it on the gateway's server. */
  readonly listen: ServerApiListen | undefined;
  /** A path on the gateway's server; undefined with `listen`. */
  readonly path: string | undefined;
  /** Accepted API keys (`Authorization: Bearer <key>`). */
  readonly keys: readonly string[];
  /** jwtAuth options (src/jwt.ts): a Bearer JWT it verifies is accepted too. */
  readonly jwt: Readonly<Record<string, unknown>> | undefined;
  readonly consume: ServerApiConsume | undefined;
  /** How long a publish's idempotency key is remembered, in ms. */
  readonly idempotencyWindowMs: number;
  /**
   * The largest request, in bytes: an HTTP body (413 beyond), a stream entry's `request` or a
   * NATS message (refused unhandled beyond).
   */
  readonly maxBodyBytes: number;
  /** How long a request body may take to arrive, in ms (408 beyond). */
  readonly bodyTimeoutMs: number;
  /** callClient's timeout when the request gives none, in ms. */
  readonly callTimeoutMs: number;
  /** The longest timeoutMs a callClient may ask for, in ms. */
  readonly maxCallTimeoutMs: number;
  /** How long `subscribers` waits for the other nodes' counts, in ms. */
  readonly countWindowMs: number;
  /** Calls to clients on other nodes awaiting their answer at once (beyond: -32000). */
  readonly maxPendingCalls: number;
  /**
   * Of those, what one caller's requests may hold (an API key, a token's subject, the broker
   * consumer's requests together; beyond: -32000), so one backend cannot refuse the others:
   * a quarter of maxPendingCalls by default.
   */
  readonly maxPendingCallsPerCaller: number;
  /** The most messages one `history` read returns. */
  readonly maxHistoryLimit: number;
  /**
   * The most bytes (UTF-8) of messages one `history` page holds: the page ends before the
   * message that would pass it (a first message larger than it is a page of its own), `more`
   * set, so a page of `maxHistoryLimit` large messages is not one reply of a GiB.
   */
  readonly maxHistoryBytes: number;
}

export const serverApiDefaults = Object.freeze({
  idempotencyWindowMs: 600_000,
  maxBodyBytes: 1_048_576,
  bodyTimeoutMs: 10_000,
  callTimeoutMs: 10_000,
  maxCallTimeoutMs: 60_000,
  countWindowMs: 250,
  maxPendingCalls: 10_000,
  maxHistoryLimit: 1_000,
  maxHistoryBytes: 4 * 1_048_576,
  /** listen: the gateway's own bounds for its port. */
  maxHttpSockets: defaultLimits.maxHttpSockets,
  maxHttpSocketsPerIp: defaultLimits.maxHttpSocketsPerIp,
  headersTimeoutMs: defaultLimits.headersTimeoutMs,
  group: 'wsrpc-gateway',
  /**
   * consume: /readyz follows the consumer. Off for a node whose WebSocket service should stay in
   * the load balancer while the consumer's broker is out (with a `consume.url` of its own, every
   * node would go out at once).
   */
  readiness: true,
  /** consume: requests handled at once. */
  maxConcurrent: 64,
  /** consume (NATS): messages waiting for a slot. */
  maxQueued: 256,
  /** consume (Redis): how long an entry left unacknowledged waits to be taken over, in ms. */
  claimIdleMs: 60_000,
  /** consume (Redis): deliveries of an entry before a takeover sends it to the dead letters. */
  maxDeliveries: 5,
});

const nonEmptyString: Rule = (value, name) => {
  if (typeof value !== 'string') refuse(name, 'a non-empty string', value);
  if (value === '') refuse(name, 'a non-empty string', value, true);
};

const keyList: Rule = (value, name) => {
  if (!Array.isArray(value))
    refuse(name, `an array of strings of at least ${MIN_KEY_LENGTH} characters`, value);
  value.forEach((key, i) => {
    if (typeof key !== 'string') {
      refuse(`${name}[${i}]`, `a string of at least ${MIN_KEY_LENGTH} characters`, key);
    }
    if (key.length < MIN_KEY_LENGTH) {
      // The key itself is a secret: its length is told, never its value.
      throw new RangeError(
        `${name}[${i}] must be a string of at least ${MIN_KEY_LENGTH} characters, not one of ${key.length}`,
      );
    }
    if (/\s/.test(key)) {
      // A Bearer token is read up to the first space: a key with one never authenticates.
      throw new TypeError(
        `${name}[${i}] must not contain whitespace (a Bearer token ends at the first space): the key of ${key.length} characters has some`,
      );
    }
  });
};

/**
 * Check the `serverApi` section and fill in its defaults. Exactly one of `listen` and `path`;
 * at least one of `keys` and `jwt` (the API is never open). `prefix` names where the section
 * sits in its file, for the messages.
 */
export function resolveServerApiConfig(
  value: unknown,
  prefix = 'serverApi.',
  clientsJwt?: unknown,
): ServerApiConfig {
  const owner = prefix.slice(0, -1) || 'serverApi';
  if (!isRecord(value)) refuse(owner, 'an object', value);
  const ms = numberIn(1, MAX_DELAY_MS, true);
  const o = checkOptions(
    value,
    {
      listen: ofType('object', 'an object'),
      path: null,
      keys: keyList,
      jwt: ofType('object', 'an object'),
      consume: ofType('object', 'an object'),
      idempotencyWindowMs: numberIn(1, MAX_IDEMPOTENCY_WINDOW_MS, true),
      maxBodyBytes: numberIn(1, 2 ** 30, true),
      bodyTimeoutMs: ms,
      callTimeoutMs: ms,
      maxCallTimeoutMs: ms,
      countWindowMs: numberIn(1, 60_000, true),
      maxPendingCalls: numberIn(1, 1_000_000, true),
      maxPendingCallsPerCaller: numberIn(1, 1_000_000, true),
      maxHistoryLimit: numberIn(1, 100_000, true),
      maxHistoryBytes: numberIn(1, 2 ** 30, true),
    },
    prefix,
    owner,
  );
  if ((o['listen'] === undefined) === (o['path'] === undefined)) {
    throw new TypeError(
      `${owner} needs exactly one of ${prefix}listen (its own port) and ${prefix}path (a path on the gateway's port)`,
    );
  }
  let path: string | undefined;
  if (o['path'] !== undefined) {
    try {
      path = resolvePath(o['path']);
    } catch (err) {
      // resolvePath names `path`: the message names it where it is in the file.
      (err as Error).message = `${prefix}${(err as Error).message}`;
      throw err;
    }
  }
  const keys = (o['keys'] as string[] | undefined) ?? [];
  if (keys.length === 0 && o['jwt'] === undefined) {
    throw new TypeError(
      `${owner} needs ${prefix}keys (API keys) or ${prefix}jwt (jwtAuth options): the server API is never open`,
    );
  }
  if (o['jwt'] !== undefined && isRecord(clientsJwt)) {
    refuseSharedJwtKey(o['jwt'] as Record<string, unknown>, clientsJwt, `${prefix}jwt`);
  }
  const defaults = serverApiDefaults;
  const maxPendingCalls = (o['maxPendingCalls'] as number | undefined) ?? defaults.maxPendingCalls;
  const config: ServerApiConfig = {
    listen: o['listen'] === undefined ? undefined : resolveListen(o['listen'], `${prefix}listen.`),
    path,
    keys: Object.freeze([...keys]),
    jwt: o['jwt'] as Record<string, unknown> | undefined,
    consume:
      o['consume'] === undefined ? undefined : resolveConsume(o['consume'], `${prefix}consume.`),
    idempotencyWindowMs:
      (o['idempotencyWindowMs'] as number | undefined) ?? defaults.idempotencyWindowMs,
    maxBodyBytes: (o['maxBodyBytes'] as number | undefined) ?? defaults.maxBodyBytes,
    bodyTimeoutMs: (o['bodyTimeoutMs'] as number | undefined) ?? defaults.bodyTimeoutMs,
    callTimeoutMs: (o['callTimeoutMs'] as number | undefined) ?? defaults.callTimeoutMs,
    maxCallTimeoutMs: (o['maxCallTimeoutMs'] as number | undefined) ?? defaults.maxCallTimeoutMs,
    countWindowMs: (o['countWindowMs'] as number | undefined) ?? defaults.countWindowMs,
    maxPendingCalls,
    maxPendingCallsPerCaller:
      (o['maxPendingCallsPerCaller'] as number | undefined) ??
      Math.max(1, Math.floor(maxPendingCalls / 4)),
    maxHistoryLimit: (o['maxHistoryLimit'] as number | undefined) ?? defaults.maxHistoryLimit,
    maxHistoryBytes: (o['maxHistoryBytes'] as number | undefined) ?? defaults.maxHistoryBytes,
  };
  if (config.maxPendingCallsPerCaller > maxPendingCalls) {
    refuse(
      `${prefix}maxPendingCallsPerCaller`,
      `at most ${prefix}maxPendingCalls (${maxPendingCalls})`,
      config.maxPendingCallsPerCaller,
      true,
    );
  }
  if (config.callTimeoutMs > config.maxCallTimeoutMs) {
    refuse(
      `${prefix}callTimeoutMs`,
      `at most ${prefix}maxCallTimeoutMs (${config.maxCallTimeoutMs})`,
      config.callTimeoutMs,
      true,
    );
  }
  return Object.freeze(config);
}

function resolveListen(value: unknown, prefix: string): ServerApiListen {
  const o = checkOptions(
    value,
    {
      host: nonEmptyString,
      port: numberIn(0, 65_535, true),
      maxHttpSockets: numberIn(1, Infinity, true),
      maxHttpSocketsPerIp: numberIn(1, Infinity, true),
      headersTimeoutMs: numberIn(1, MAX_DELAY_MS, true),
    },
    prefix,
    prefix.slice(0, -1),
  );
  if (o['port'] === undefined) refuse(`${prefix}port`, 'an integer from 0 to 65535', undefined);
  const defaults = serverApiDefaults;
  return Object.freeze({
    host: (o['host'] as string | undefined) ?? '127.0.0.1',
    port: o['port'] as number,
    maxHttpSockets: (o['maxHttpSockets'] as number | undefined) ?? defaults.maxHttpSockets,
    maxHttpSocketsPerIp:
      (o['maxHttpSocketsPerIp'] as number | undefined) ?? defaults.maxHttpSocketsPerIp,
    headersTimeoutMs: (o['headersTimeoutMs'] as number | undefined) ?? defaults.headersTimeoutMs,
  });
}

const deadLetterRule: Rule = (value, name) => {
  if (value !== false && (typeof value !== 'string' || value === '')) {
    refuse(name, 'a stream key or false', value);
  }
};

/** The dead-letter stream: `<stream>:dead-letter` by default, none when false. */
function deadLetterOf(value: unknown, stream: string, prefix: string): string | undefined {
  if (value === false) return undefined;
  const key = (value as string | undefined) ?? `${stream}:dead-letter`;
  if (key === stream) refuse(`${prefix}deadLetterStream`, 'another key than the stream', key, true);
  return key;
}

function resolveConsume(value: unknown, prefix: string): ServerApiConsume {
  const o = checkOptions(
    value,
    {
      redisStream: nonEmptyString,
      natsSubject: nonEmptyString,
      group: nonEmptyString,
      url: nonEmptyString,
      maxConcurrent: numberIn(1, 10_000, true),
      maxQueued: numberIn(0, 100_000, true),
      claimIdleMs: numberIn(1_000, 86_400_000, true),
      maxDeliveries: numberIn(1, 1_000, true),
      deadLetterStream: deadLetterRule,
      readiness: ofType('boolean', 'true or false'),
    },
    prefix,
    prefix.slice(0, -1),
  );
  const url = o['url'] as string | undefined;
  const group = (o['group'] as string | undefined) ?? serverApiDefaults.group;
  const maxConcurrent =
    (o['maxConcurrent'] as number | undefined) ?? serverApiDefaults.maxConcurrent;
  const readiness = (o['readiness'] as boolean | undefined) ?? serverApiDefaults.readiness;
  if ((o['redisStream'] === undefined) === (o['natsSubject'] === undefined)) {
    throw new TypeError(
      `${prefix.slice(0, -1)} needs exactly one of ${prefix}redisStream and ${prefix}natsSubject`,
    );
  }
  if (o['redisStream'] !== undefined) {
    if (o['maxQueued'] !== undefined) {
      throw new TypeError(
        `${prefix}maxQueued applies to ${prefix}natsSubject only: a Redis stream's entries wait in the stream`,
      );
    }
    return Object.freeze({
      kind: 'redis',
      stream: o['redisStream'] as string,
      group,
      url,
      maxConcurrent,
      claimIdleMs: (o['claimIdleMs'] as number | undefined) ?? serverApiDefaults.claimIdleMs,
      maxDeliveries: (o['maxDeliveries'] as number | undefined) ?? serverApiDefaults.maxDeliveries,
      deadLetterStream: deadLetterOf(o['deadLetterStream'], o['redisStream'] as string, prefix),
      readiness,
    });
  }
  for (const option of ['claimIdleMs', 'maxDeliveries', 'deadLetterStream']) {
    if (o[option] !== undefined) {
      throw new TypeError(
        `${prefix}${option} applies to ${prefix}redisStream only: NATS keeps no unacknowledged request`,
      );
    }
  }
  const subject = o['natsSubject'] as string;
  if (/[\s*>]/.test(subject)) {
    refuse(`${prefix}natsSubject`, 'a NATS subject without spaces or wildcards', subject, true);
  }
  const maxQueued = (o['maxQueued'] as number | undefined) ?? serverApiDefaults.maxQueued;
  return Object.freeze({
    kind: 'nats',
    subject,
    queue: group,
    url,
    maxConcurrent,
    maxQueued,
    readiness,
  });
}

const JWT_KEY_SOURCES = ['secret', 'publicKey', 'jwks', 'jwksUrl'] as const;

/**
 * Refuse a `serverApi.jwt` that verifies with the clients' `jwt` key (`clientsJwt`, the file's
 * top-level `jwt`): a token is not marked as an operator's, so every client's WebSocket token
 * would call the server API (publish anywhere, disconnectUser, callClient). Allowed only when
 * `serverApi.jwt` requires an audience (or an issuer) that the clients' `jwt` does not accept.
 */
function refuseSharedJwtKey(
  apiJwt: Readonly<Record<string, unknown>>,
  clientsJwt: Readonly<Record<string, unknown>>,
  path: string,
): void {
  const shared = sharedKey(apiJwt, clientsJwt);
  if (shared === undefined) return;
  if (
    excludes(apiJwt['audience'], clientsJwt['audience']) ||
    excludes(apiJwt['issuer'], clientsJwt['issuer'])
  ) {
    return;
  }
  const [apiSource, clientsSource] = shared;
  throw new TypeError(
    `${path}.${apiSource} is the same key as jwt.${clientsSource}: every client's WebSocket token would be ` +
      `accepted by the server API (publish, disconnectUser, callClient). Give ${path} a key of ` +
      `its own, or a ${path}.audience (or ${path}.issuer) that jwt.audience (jwt.issuer) does ` +
      `not accept`,
  );
}

type KeySource = (typeof JWT_KEY_SOURCES)[number];

/**
 * The key sources of `api` and `clients` (in that order) that verify the same tokens, compared
 * by what they verify with, whatever the form: a PEM, a JWK, a KeyObject, a member of `jwks`.
 */
function sharedKey(
  api: Readonly<Record<string, unknown>>,
  clients: Readonly<Record<string, unknown>>,
): [KeySource, KeySource] | undefined {
  const theirs = new Map<string, KeySource>();
  for (const source of JWT_KEY_SOURCES) {
    for (const print of keyPrints(source, clients[source])) theirs.set(print, source);
  }
  for (const source of JWT_KEY_SOURCES) {
    for (const print of keyPrints(source, api[source])) {
      const match = theirs.get(print);
      if (match !== undefined) return [source, match];
    }
  }
  return undefined;
}

/** What a key source verifies with, as comparable strings (one per key of a set). */
function keyPrints(source: KeySource, value: unknown): string[] {
  if (value === undefined) return [];
  switch (source) {
    case 'secret':
      return [`secret:${bytesOf(value).toString('base64url')}`];
    case 'jwksUrl':
      return [`url:${urlOf(value)}`];
    case 'jwks':
      return isRecord(value) && Array.isArray(value['keys'])
        ? value['keys'].map(publicKeyPrint)
        : [];
    case 'publicKey':
      return [publicKeyPrint(value)];
  }
}

/**
 * A public key's members that make it the key it is (kty and n, e or crv, x, y), whatever form it
 * is given in (PEM, JWK with or without kid, alg, use, KeyObject, CryptoKey); the value as it is
 * when it is not a key Node reads.
 */
function publicKeyPrint(value: unknown): string {
  try {
    const key =
      typeof value === 'string'
        ? createPublicKey(value)
        : value instanceof KeyObject
          ? value.type === 'public'
            ? value
            : createPublicKey(value)
          : isCryptoKey(value)
            ? KeyObject.from(value)
            : createPublicKey({ key: value as JsonWebKey, format: 'jwk' });
    const jwk = key.export({ format: 'jwk' });
    const { kty, n, e, crv, x, y } = jwk;
    return `key:${canonical({ kty, n, e, crv, x, y })}`;
  } catch {
    return `value:${typeof value === 'string' ? value.replace(/\s+/g, '') : canonical(value)}`;
  }
}

function isCryptoKey(value: unknown): value is CryptoKey {
  return typeof CryptoKey !== 'undefined' && value instanceof CryptoKey;
}

/** Whether the server API requires a value (`api`) none of which the clients' (`clients`) accept. */
function excludes(api: unknown, clients: unknown): boolean {
  if (api === undefined || clients === undefined) return false; // none given: any is accepted
  const accepted = new Set(listOf(clients));
  return listOf(api).every((value) => !accepted.has(value));
}

function listOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [value];
}

function bytesOf(value: unknown): Buffer {
  if (typeof value === 'string') return Buffer.from(value);
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.length);
  return Buffer.alloc(0);
}

function urlOf(value: unknown): string {
  try {
    return new URL(String(value)).href;
  } catch {
    return String(value);
  }
}

/** JSON with sorted keys: two JWKs of the same members compare equal. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isRecord(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}
