// Keys, tokens and a request shape for the jwtAuth tests.
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import type { CryptoKey, JWK, JWTPayload } from 'jose';
import { expect } from 'vitest';
import type { DisconnectEvent, RpcClient } from '../../src/client/index.js';
import { jwtAuth } from '../../src/jwt.js';
import type { JwtContext } from '../../src/jwt.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import type { Resources } from '../support/resources.js';
import type { JwtAuthRequest } from '../../src/server/jwt/token-source.js';

export const ISSUER = 'https://login.example.com';
export const AUDIENCE = 'https://api.example.com/rpc';
export const SECRET = 'a-shared-secret-of-at-least-32-bytes!!';

export const now = (): number => Math.floor(Date.now() / 1000);

/** Claims that pass every check: this issuer and audience, alice, ten minutes left. */
export const validClaims = (extra: JWTPayload = {}): JWTPayload => ({
  iss: ISSUER,
  aud: AUDIENCE,
  sub: 'alice',
  iat: now(),
  exp: now() + 600,
  ...extra,
});

export interface SigningKey {
  alg: string;
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** The public key as it goes into a key set. */
  publicJwk: JWK;
}

export async function signingKey(alg: string, kid = `${alg}-1`): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { alg, kid, privateKey, publicKey, publicJwk };
}

/** A token with exactly `claims`, signed by `key` (its alg and kid). */
export function signWith(key: SigningKey, claims: JWTPayload = validClaims()): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid })
    .sign(key.privateKey);
}

/** An HS256 token with exactly `claims`. */
export function signHs256(
  claims: JWTPayload = validClaims(),
  secret: string | Uint8Array = SECRET,
): Promise<string> {
  const bytes = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(bytes);
}

/** base64url of a JSON value or of bytes. */
export const b64url = (value: unknown): string =>
  Buffer.from(value instanceof Uint8Array ? value : JSON.stringify(value)).toString('base64url');

/** An unsecured token (`alg: none`, empty signature) with these claims. */
export const unsecured = (claims: JWTPayload = validClaims()): string =>
  `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;

/** The request shape authenticate reads: a token as the gateway hands it over. */
export const withToken = (token: string | undefined): JwtAuthRequest => ({
  token,
  headers: {},
  cookies: {},
  protocols: [],
});

/** The UpgradeRejection `promise` rejects with, as status and message. */
export async function refusal(
  promise: Promise<unknown>,
): Promise<{ status: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(UpgradeRejection);
    const { status, message } = err as UpgradeRejection;
    return { status, message };
  }
  throw new Error('expected a refusal, the token was accepted');
}

/**
 * A gateway on `res` with jwtAuth over SECRET (in-band authentication or not) and a `whoami`
 * method answering the session's user: what the client's token-handling tests talk to.
 */
export async function whoamiJwtGateway(res: Resources, inBand: boolean) {
  const auth = jwtAuth({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE });
  const running = await res.gateway<JwtContext>({
    ...auth,
    identity: { ...auth.identity, inBand },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return running;
}

/** Every disconnect event of `client` from now on, in order. */
export function disconnectsOf(client: RpcClient): DisconnectEvent[] {
  const events: DisconnectEvent[] = [];
  client.disconnects$.subscribe((event) => events.push(event));
  return events;
}
