// Where the verifying key comes from, and which `alg` values fit it: a shared secret (HS*), one
// public key (the algorithms of its type), or a key set in memory or at a URL (jose picks the
// key by `kid`; a URL's set is cached and fetched again on an unknown `kid`, at most once per
// cooldown, a failed fetch's included, and never used past its max age). Problems of the key set
// itself become KeySetUnavailable (503), never a 401.
import { createLocalJWKSet, createRemoteJWKSet, customFetch, errors, jwksCache } from 'jose';
import type {
  ExportedJWKSCache,
  JWKSCacheInput,
  JWTVerifyGetKey,
  KeyInput,
  RemoteJWKSet,
} from 'jose';
import { jwtDefaults } from './jwt-options.js';
import { importPublicKey } from './public-key.js';
import type { ResolvedJwtOptions } from './jwt-options.js';
import type { JwtContext } from './claims-context.js';
import { KeySetUnavailable } from './refusals.js';

export interface KeySource {
  /** What `jwtVerify` takes: a key, or a resolver by the token's header. */
  readonly key: KeyInput | JWTVerifyGetKey;
  /** The `alg` values accepted. */
  readonly algorithms: readonly string[];
}

/** The key source the options name, with the algorithms accepted. */
export function keySourceOf(options: ResolvedJwtOptions<JwtContext>): KeySource {
  const { key } = options;
  switch (key.kind) {
    case 'secret':
      return { key: key.secret, algorithms: options.algorithms ?? jwtDefaults.secretAlgorithms };
    case 'publicKey':
      return importPublicKey(key.publicKey, options.algorithms);
    case 'jwks':
      return {
        key: resolverOf(localSet(key.jwks)),
        algorithms: options.algorithms ?? jwtDefaults.keyAlgorithms,
      };
    case 'jwksUrl':
      return {
        key: resolverOf(remoteSet(key.url, options)),
        algorithms: options.algorithms ?? jwtDefaults.keyAlgorithms,
      };
  }
}

/** The set at `url`, fetched as the options say, its failures cooled down. */
function remoteSet(url: URL, options: ResolvedJwtOptions<JwtContext>): JWTVerifyGetKey {
  // jose writes the set of each successful fetch here, with when it was fetched.
  const lastFetched: Partial<ExportedJWKSCache> = {};
  const remote = createRemoteJWKSet(url, {
    timeoutDuration: options.jwksTimeoutMs,
    cooldownDuration: options.jwksCooldownMs,
    cacheMaxAge: options.jwksCacheMaxAgeMs,
    [jwksCache]: lastFetched as JWKSCacheInput,
    [customFetch]: checkedFetch,
  });
  return coolingDownOnFailure(remote, lastFetched, options);
}

function localSet(jwks: Parameters<typeof createLocalJWKSet>[0]): JWTVerifyGetKey {
  try {
    return createLocalJWKSet(jwks);
  } catch (err) {
    throw new TypeError(`jwks must be a JSON Web Key Set: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * A remote set whose failed fetch starts a cooldown as a successful one does. jose waits out its
 * cooldown only after a fetch that succeeded, so while the key set's server fails, every token
 * with a `kid` the cached set lacks (anyone can make one) would fetch again. For
 * `jwksCooldownMs` after a failure, a token is checked against the set last fetched while that
 * set is younger than `jwksCacheMaxAgeMs` (a key removed from the set, or leaked, is not trusted
 * past it because its server is down), and otherwise (or when its key is not there) given that
 * failure again, without a fetch.
 */
function coolingDownOnFailure(
  remote: RemoteJWKSet,
  lastFetched: Partial<ExportedJWKSCache>,
  options: Pick<ResolvedJwtOptions<JwtContext>, 'jwksCooldownMs' | 'jwksCacheMaxAgeMs'>,
): JWTVerifyGetKey {
  let failed: { at: number; error: unknown; cached: CachedSet | undefined } | undefined;
  return async (header, token) => {
    if (failed !== undefined && performance.now() - failed.at < options.jwksCooldownMs) {
      const { cached, error } = failed;
      if (cached === undefined || Date.now() >= cached.staleAt) throw error;
      try {
        return await cached.verify(header, token);
      } catch (err) {
        if (err instanceof errors.JWKSNoMatchingKey) throw error;
        throw err;
      }
    }
    try {
      const key = await remote(header, token);
      failed = undefined;
      return key;
    } catch (err) {
      if (!(
        err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys
      )) {
        failed = { at: performance.now(), error: err, cached: cachedSet(lastFetched, options) };
      }
      throw err;
    }
  };
}

/** The set last fetched, and when (ms since the epoch, as jose dates it) it grows too old. */
interface CachedSet {
  readonly verify: JWTVerifyGetKey;
  readonly staleAt: number;
}

function cachedSet(
  { jwks, uat }: Partial<ExportedJWKSCache>,
  { jwksCacheMaxAgeMs }: Pick<ResolvedJwtOptions<JwtContext>, 'jwksCacheMaxAgeMs'>,
): CachedSet | undefined {
  if (jwks === undefined || uat === undefined) return undefined;
  return { verify: createLocalJWKSet(jwks), staleAt: uat + jwksCacheMaxAgeMs };
}

/**
 * The set's resolver, with every failure that is not "no key for this token" made a
 * KeySetUnavailable. JWKSMultipleMatchingKeys passes as it is, its candidates in it: jwtAuth's
 * verify tries each.
 */
function resolverOf(set: JWTVerifyGetKey): JWTVerifyGetKey {
  return async (header, token) => {
    try {
      return await set(header, token);
    } catch (err) {
      if (
        err instanceof errors.JWKSNoMatchingKey ||
        err instanceof errors.JWKSMultipleMatchingKeys ||
        err instanceof KeySetUnavailable
      ) {
        throw err;
      }
      throw new KeySetUnavailable(unavailableDetail(err), { cause: err });
    }
  };
}

function unavailableDetail(err: unknown): string {
  if (err instanceof errors.JWKSTimeout) return 'timed out';
  if (err instanceof errors.JWKSInvalid) return 'not a JSON Web Key Set';
  if (err instanceof errors.JOSEError && /JSON/.test(err.message)) return 'not JSON';
  return err instanceof Error ? err.message : String(err);
}

/**
 * The most bytes of a key set read from `jwksUrl`. Real sets are a few KiB; jose reads the whole
 * body before parsing it, so a server sending without end would have the gateway hold all it
 * could send within jwksTimeoutMs (hundreds of MiB over a fast link), then parse it on the event
 * loop. Past this: 503, the rest left unread.
 */
export const MAX_JWKS_BYTES = 1024 * 1024;

/**
 * `fetch`, with the reasons a key set cannot be had named: its HTTP status, a body past
 * MAX_JWKS_BYTES, or the network error's code. A timeout passes as it is, for jose to report as
 * one.
 */
const checkedFetch = async (url: string, init: RequestInit): Promise<Response> => {
  let response: Response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') throw err;
    const code = ((err as Error).cause as { code?: unknown } | undefined)?.code;
    throw new KeySetUnavailable(`unreachable${typeof code === 'string' ? ` (${code})` : ''}`, {
      cause: err,
    });
  }
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new KeySetUnavailable(`HTTP ${response.status}`);
  }
  const body = await boundedBody(response, init.signal);
  return new Response(body, { status: 200, headers: response.headers });
};

/**
 * The body's text (UTF-8, as `response.json()` reads it), at most MAX_JWKS_BYTES; the stream is
 * cancelled past them.
 */
async function boundedBody(
  response: Response,
  signal: AbortSignal | null | undefined,
): Promise<string> {
  const tooLarge = (): KeySetUnavailable =>
    new KeySetUnavailable(`larger than ${MAX_JWKS_BYTES} bytes`);
  if (Number(response.headers.get('content-length')) > MAX_JWKS_BYTES) {
    await response.body?.cancel();
    throw tooLarge();
  }
  const reader = response.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = (await reader?.read()) ?? { done: true, value: undefined };
      if (done) break;
      size += value.byteLength;
      if (size > MAX_JWKS_BYTES) {
        await reader!.cancel();
        throw tooLarge();
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof KeySetUnavailable) throw err;
    // The timeout's abort, as jose reports it; else the connection broke mid-body.
    if (signal?.aborted) throw signal.reason;
    throw new KeySetUnavailable('unreachable', { cause: err });
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}
