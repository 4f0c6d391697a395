// The key of a file's jwtAuth options (`jwt`, `serverApi.jwt`) imported as jwtAuth imports it
// when serve starts (importPublicKey, jwtAuth's own), so that check-config refuses what serve
// would, naming the key's path. Only node:crypto: jose, an optional peer, is not loaded.
import { createPublicKey } from 'node:crypto';
import type { JsonWebKeyInput } from 'node:crypto';
import { cut, describe, isRecord } from '../peer/option-rules.js';
import { importPublicKey } from '../server/jwt/public-key.js';
import type { ResolvedJwtOptions } from '../server/jwt/jwt-options.js';
import type { JwtContext } from '../server/jwt/claims-context.js';

/** The key types of a key set jwtAuth verifies with; a set's other keys are never picked. */
const VERIFYING_KEY_TYPES = ['RSA', 'EC', 'OKP'];

/**
 * Throw, as jwtAuth would when serve starts, when the key of `resolved` cannot be imported or
 * does not fit its algorithms: a TypeError or RangeError naming the option (`publicKey`,
 * `jwks.keys[0]`, `algorithms`) as jwtAuth's own rules do.
 */
export function checkJwtKey(resolved: ResolvedJwtOptions<JwtContext>): void {
  const { key } = resolved;
  if (key.kind === 'publicKey') {
    importPublicKey(key.publicKey, resolved.algorithms, 'a PEM public key or a JWK');
  } else if (key.kind === 'jwks') checkKeySet(key.jwks.keys as unknown[]);
}

/** Each key of a set that jwtAuth could pick: jose imports it only when a token names it. */
function checkKeySet(keys: readonly unknown[]): void {
  keys.forEach((jwk, index) => {
    const name = `jwks.keys[${index}]`;
    if (!isRecord(jwk)) {
      throw new TypeError(`${name} must be a JSON Web Key (an object), not ${describe(jwk)}`);
    }
    if (!VERIFYING_KEY_TYPES.includes(jwk['kty'] as string)) return;
    try {
      createPublicKey({ key: jwk, format: 'jwk' } as JsonWebKeyInput);
    } catch (err) {
      throw new TypeError(
        `${name} must be a usable ${String(jwk['kty'])} public key: ${cut((err as Error).message)}`,
        { cause: err },
      );
    }
  });
}
