// The key of a file's jwtAuth options (`jwt`, `serverApi.jwt`) imported as jwtAuth imports it
// when serve starts, so that check-config refuses what serve would, naming the key's path. Only
// node:crypto: jwtAuth's own key source loads jose, an optional peer a check must not need.
import { createPublicKey } from 'node:crypto';
import type { JsonWebKeyInput, KeyObject } from 'node:crypto';
import { cut, describe, isRecord } from '../peer/option-rules.js';
import { jwtDefaults } from '../server/jwt/jwt-options.js';
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
  if (key.kind === 'publicKey') checkPublicKey(key.publicKey, resolved.algorithms);
  else if (key.kind === 'jwks') checkKeySet(key.jwks.keys as unknown[]);
}

function checkPublicKey(given: unknown, algorithms: readonly string[] | undefined): void {
  let key: KeyObject;
  try {
    key =
      typeof given === 'string'
        ? createPublicKey(given)
        : createPublicKey({ key: given, format: 'jwk' } as JsonWebKeyInput);
  } catch (err) {
    throw new TypeError(
      `publicKey must be a PEM public key or a JWK: ${cut((err as Error).message)}`,
      { cause: err },
    );
  }
  const fitting = algorithmsOfKey(key);
  const type = key.asymmetricKeyType ?? 'unknown';
  if (fitting.length === 0) {
    throw new RangeError(`publicKey is a key of type ${type}, which jwtAuth cannot verify with`);
  }
  const chosen = algorithms ?? jwtDefaults.keyAlgorithms.filter((alg) => fitting.includes(alg));
  const misfit = chosen.filter((alg) => !fitting.includes(alg));
  if (chosen.length === 0 || misfit.length > 0) {
    throw new RangeError(
      `algorithms for this publicKey (${type}) may be ${fitting.join(', ')}, not ${JSON.stringify(
        chosen.length === 0 ? [] : misfit,
      )}`,
    );
  }
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

/**
 * The `alg` values a key of each type verifies, as jwtAuth's key source (key-source.ts, which
 * loads jose) has them: a token's `alg` never makes a key be used another way.
 */
function algorithmsOfKey(key: KeyObject): readonly string[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      const alg = { prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' }[curve ?? ''];
      return alg ? [alg] : [];
    }
    case 'ed25519':
      return ['EdDSA', 'Ed25519'];
    default:
      return [];
  }
}
