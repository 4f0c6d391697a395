// Who may call the server API: a Bearer API key (compared in constant time) or a Bearer JWT that
// jwtAuth verifies. Nothing else: the API is never open (resolveServerApiConfig refuses a
// configuration without either).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * Who called: the key's index in `keys`, the JWT's user, or whoever could write to the consumed
 * stream or subject.
 */
export type ApiCaller =
  | { readonly kind: 'key'; readonly key: number }
  | { readonly kind: 'jwt'; readonly user: string }
  | { readonly kind: 'broker' };

/**
 * Whose share of the table of calls to clients a request takes: one API key's requests (by its
 * place in the list, never its value), one token subject's, or the broker consumer's together.
 */
export function callerKey(caller: ApiCaller): string {
  switch (caller.kind) {
    case 'key':
      return `key:${caller.key}`;
    case 'jwt':
      return `jwt:${caller.user}`;
    case 'broker':
      return 'broker';
  }
}

/** Checks one request's credentials; resolves undefined when they are missing or refused. */
export type ApiAuthenticate = (headers: IncomingHttpHeaders) => Promise<ApiCaller | undefined>;

/** The token of an `Authorization: Bearer <token>` header; undefined when there is none. */
export function bearerOf(headers: IncomingHttpHeaders): string | undefined {
  const authorization = headers.authorization;
  return typeof authorization === 'string' ? BEARER.exec(authorization)?.[1] : undefined;
}

/**
 * A key check whose time does not depend on where a wrong key differs from a right one: keys
 * are compared as SHA-256 digests (equal lengths, so timingSafeEqual applies to keys of any
 * length) and every key is compared, not just until the first match.
 */
export function keyMatcher(keys: readonly string[]): (token: string) => number | undefined {
  const digests = keys.map((key) => createHash('sha256').update(key).digest());
  return (token) => {
    const digest = createHash('sha256').update(token).digest();
    let found: number | undefined;
    digests.forEach((candidate, i) => {
      if (timingSafeEqual(candidate, digest) && found === undefined) found = i;
    });
    return found;
  };
}

/**
 * The server API's authentication: API keys first, then the JWT verifier (jwtAuth, loaded only
 * when `jwt` options are given: it needs jose).
 */
export async function apiAuthentication(
  keys: readonly string[],
  jwt: Readonly<Record<string, unknown>> | undefined,
): Promise<ApiAuthenticate> {
  const matchKey = keyMatcher(keys);
  let verify: ((token: string, headers: IncomingHttpHeaders) => Promise<string>) | undefined;
  if (jwt) {
    const { jwtAuth } = await import('../server/jwt/jwt-auth.js');
    const auth = jwtAuth(jwt);
    verify = async (token, headers) =>
      auth.userOf(await auth.authenticate({ token, headers, cookies: {}, protocols: [] }));
  }
  return async (headers) => {
    const token = bearerOf(headers);
    if (token === undefined) return undefined;
    const key = keys.length > 0 ? matchKey(token) : undefined;
    if (key !== undefined) return { kind: 'key', key };
    if (!verify) return undefined;
    try {
      return { kind: 'jwt', user: await verify(token, headers) };
    } catch {
      return undefined;
    }
  };
}
