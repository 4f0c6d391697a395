// jwtAuth's options: their types, their defaults, and the one check that runs when jwtAuth is
// called (exactly one key source, algorithms that fit it, numbers in range), so a mistake fails
// at start-up with the option's name rather than as refused connections.
import type { KeyObject } from 'node:crypto';
import type { CryptoKey, JSONWebKeySet, JWK, JWTPayload } from 'jose';
import {
  checkOptions,
  isRecord,
  numberIn,
  ofType,
  refuse,
  strings,
} from '../../peer/option-rules.js';
import type { Rule } from '../../peer/option-rules.js';
import type { JwtContext } from './claims-context.js';

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** Which claims hold the user and the allowed topic and method patterns. */
export interface JwtClaimNames {
  /** The user (`userOf`). Default `"sub"`; required in every token. */
  user?: string;
  /** Topic patterns the session may subscribe to and publish. Default `"topics"`. */
  topics?: string;
  /** Method patterns the session may call. Default `"methods"`. */
  methods?: string;
}

/** What `jwtAuth` takes. Exactly one of `secret`, `publicKey`, `jwks`, `jwksUrl`. */
export interface JwtAuthOptions<C extends JwtContext = JwtContext> {
  /** HS256 (HS384, HS512): the shared secret, at least 32 bytes. */
  secret?: string | Uint8Array;
  /** One public key: PEM (SPKI), a JWK, a Node `KeyObject` or a `CryptoKey`. */
  publicKey?: string | JWK | KeyObject | CryptoKey;
  /** A JSON Web Key Set held in memory; the token's `kid` picks the key. */
  jwks?: JSONWebKeySet;
  /**
   * A JSON Web Key Set fetched from this URL (https:, or http: on loopback), cached, and fetched
   * again when a token names a `kid` it does not hold.
   */
  jwksUrl?: string | URL;
  /** How long one fetch of `jwksUrl` may take; past it the token is refused with 503. Default 5 000. */
  jwksTimeoutMs?: number;
  /** The least time between two fetches of `jwksUrl` caused by unknown `kid`s. Default 30 000. */
  jwksCooldownMs?: number;
  /** How long a fetched key set is used before it is fetched again. Default 600 000. */
  jwksCacheMaxAgeMs?: number;
  /**
   * The `alg` values accepted. Default `["HS256"]` with `secret`; with keys, those of RS256,
   * ES256 and EdDSA that fit the key (all three for a key set). `none` is never accepted.
   */
  algorithms?: readonly string[];
  /** The `iss` required (one of these). */
  issuer?: string | readonly string[];
  /** An `aud` required (one of these). */
  audience?: string | readonly string[];
  /** Seconds of clock difference allowed on `exp`, `nbf`, `iat`. Default 30. */
  clockToleranceSec?: number;
  /** Also take the token from this cookie (after `request.token` and the Bearer header). */
  cookie?: string;
  /** Also take the token from an offered subprotocol starting with this prefix, e.g. `"bearer."`. */
  protocolPrefix?: string;
  /** Claim names. */
  claims?: JwtClaimNames;
  /**
   * The session's context from the verified claims and the identity read from them; it must
   * keep the identity's fields (spread it). Throw an `UpgradeRejection` to refuse.
   */
  context?: (claims: Readonly<JWTPayload>, identity: JwtContext) => C | Promise<C>;
}

/** The defaults of `jwtAuth`'s options. */
export const jwtDefaults = Object.freeze({
  jwksTimeoutMs: 5_000,
  jwksCooldownMs: 30_000,
  jwksCacheMaxAgeMs: 600_000,
  clockToleranceSec: 30,
  claims: Object.freeze({ user: 'sub', topics: 'topics', methods: 'methods' }),
  /** With `secret`. */
  secretAlgorithms: Object.freeze(['HS256']),
  /** With a public key or a key set (those that fit the key). */
  keyAlgorithms: Object.freeze(['RS256', 'ES256', 'EdDSA']),
});

/** Every `alg` jwtAuth can verify; `none` is not one. */
export const SECRET_ALGORITHMS: readonly string[] = ['HS256', 'HS384', 'HS512'];
export const KEY_ALGORITHMS: readonly string[] = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/** The longest token read, in characters: longer ones are refused before any parsing. */
export const MAX_TOKEN_LENGTH = 16_384;

/** Options resolved: defaults filled in, still holding the user's key material as given. */
export interface ResolvedJwtOptions<C extends JwtContext> {
  readonly key:
    | { readonly kind: 'secret'; readonly secret: Uint8Array }
    | { readonly kind: 'publicKey'; readonly publicKey: NonNullable<JwtAuthOptions['publicKey']> }
    | { readonly kind: 'jwks'; readonly jwks: JSONWebKeySet }
    | { readonly kind: 'jwksUrl'; readonly url: URL };
  /** As given, or undefined for the default (which depends on the key). */
  readonly algorithms: readonly string[] | undefined;
  readonly jwksTimeoutMs: number;
  readonly jwksCooldownMs: number;
  readonly jwksCacheMaxAgeMs: number;
  readonly issuer: string | readonly string[] | undefined;
  readonly audience: string | readonly string[] | undefined;
  readonly clockToleranceSec: number;
  readonly cookie: string | undefined;
  readonly protocolPrefix: string | undefined;
  readonly claims: Readonly<Required<JwtClaimNames>>;
  readonly context: JwtAuthOptions<C>['context'];
}

const nonEmpty: Rule = (value, path) => {
  if (typeof value !== 'string' || value === '') refuse(path, 'a non-empty string', value);
};
const stringOrStrings: Rule = (value, path) => {
  if (typeof value === 'string' ? value === '' : !Array.isArray(value) || value.length === 0) {
    refuse(path, 'a non-empty string or a non-empty array of strings', value);
  }
  if (Array.isArray(value)) strings(value, path);
};

const rules: Readonly<Record<keyof JwtAuthOptions, Rule | null>> = {
  secret: (value, path) => {
    const bytes = typeof value === 'string' ? Buffer.byteLength(value) : undefined;
    if (bytes === undefined && !(value instanceof Uint8Array)) {
      refuse(path, 'a string or a Uint8Array of at least 32 bytes', value);
    }
    if ((bytes ?? (value as Uint8Array).byteLength) < 32) {
      throw new RangeError(`${path} must be at least 32 bytes (256 bits, RFC 7518), not shorter`);
    }
  },
  publicKey: (value, path) => {
    if (typeof value !== 'string' && (typeof value !== 'object' || value === null)) {
      refuse(path, 'a PEM string, a JWK, a KeyObject or a CryptoKey', value);
    }
  },
  jwks: (value, path) => {
    if (!isRecord(value) || !Array.isArray(value['keys'])) {
      refuse(path, 'a JSON Web Key Set { keys: [...] }', value);
    }
  },
  jwksUrl: null,
  jwksTimeoutMs: numberIn(1, MAX_DELAY_MS, true),
  jwksCooldownMs: numberIn(0, MAX_DELAY_MS, true),
  jwksCacheMaxAgeMs: numberIn(0, MAX_DELAY_MS, true),
  algorithms: null,
  issuer: stringOrStrings,
  audience: stringOrStrings,
  clockToleranceSec: numberIn(0, 3_600),
  cookie: nonEmpty,
  protocolPrefix: nonEmpty,
  claims: ofType('object', 'an object { user?, topics?, methods? } of claim names'),
  context: ofType('function'),
};

const claimRules: Readonly<Record<keyof JwtClaimNames, Rule>> = {
  user: nonEmpty,
  topics: nonEmpty,
  methods: nonEmpty,
};

const KEY_SOURCES = ['secret', 'publicKey', 'jwks', 'jwksUrl'] as const;

/** Check `jwtAuth`'s options; a TypeError or RangeError names the option and what it may be. */
export function resolveJwtOptions<C extends JwtContext>(options: unknown): ResolvedJwtOptions<C> {
  const given = checkOptions(options, rules, '', 'jwtAuth') as JwtAuthOptions<C>;
  const sources = KEY_SOURCES.filter((source) => given[source] !== undefined);
  if (sources.length !== 1) {
    throw new TypeError(
      `jwtAuth needs exactly one of secret, publicKey, jwks, jwksUrl${
        sources.length ? `, not ${sources.join(' and ')}` : ''
      }`,
    );
  }
  const key = keyOf(given);
  const algorithms = checkAlgorithms(given.algorithms, key.kind);
  const claimNames = checkOptions(given.claims, claimRules, 'claims.', 'jwtAuth claims');
  return Object.freeze({
    key,
    algorithms,
    jwksTimeoutMs: given.jwksTimeoutMs ?? jwtDefaults.jwksTimeoutMs,
    jwksCooldownMs: given.jwksCooldownMs ?? jwtDefaults.jwksCooldownMs,
    jwksCacheMaxAgeMs: given.jwksCacheMaxAgeMs ?? jwtDefaults.jwksCacheMaxAgeMs,
    issuer: given.issuer,
    audience: given.audience,
    clockToleranceSec: given.clockToleranceSec ?? jwtDefaults.clockToleranceSec,
    cookie: given.cookie,
    protocolPrefix: given.protocolPrefix,
    claims: Object.freeze({ ...jwtDefaults.claims, ...claimNames }) as Required<JwtClaimNames>,
    context: given.context,
  });
}

function keyOf(given: JwtAuthOptions<JwtContext>): ResolvedJwtOptions<JwtContext>['key'] {
  if (given.secret !== undefined) {
    const secret =
      typeof given.secret === 'string' ? new TextEncoder().encode(given.secret) : given.secret;
    return { kind: 'secret', secret };
  }
  if (given.publicKey !== undefined) return { kind: 'publicKey', publicKey: given.publicKey };
  if (given.jwks !== undefined) return { kind: 'jwks', jwks: given.jwks };
  return { kind: 'jwksUrl', url: jwksUrlOf(given.jwksUrl) };
}

/** An https: URL, or http: on a loopback host (a key set read in clear could be replaced). */
function jwksUrlOf(value: unknown): URL {
  const what = 'an https: URL (http: only on localhost, 127.0.0.1 or [::1])';
  let url: URL;
  try {
    url = new URL(value instanceof URL ? value.href : (value as string));
  } catch {
    return refuse('jwksUrl', what, value);
  }
  if (typeof value !== 'string' && !(value instanceof URL)) refuse('jwksUrl', what, value);
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    refuse('jwksUrl', what, url.href, true);
  }
  return url;
}

function checkAlgorithms(
  value: unknown,
  kind: ResolvedJwtOptions<JwtContext>['key']['kind'],
): readonly string[] | undefined {
  if (value === undefined) return undefined;
  strings(value, 'algorithms');
  const list = value as readonly string[];
  const fitting = kind === 'secret' ? SECRET_ALGORITHMS : KEY_ALGORITHMS;
  if (list.length === 0) refuse('algorithms', `a non-empty array of ${fitting.join(', ')}`, list);
  for (const alg of list) {
    if (!fitting.includes(alg)) {
      throw new RangeError(
        `algorithms may hold ${fitting.join(', ')} with ${kind}${
          alg.toLowerCase() === 'none' ? ' ("none" is never accepted)' : ''
        }, not ${JSON.stringify(alg)}`,
      );
    }
  }
  return Object.freeze([...list]);
}
