// One public key for jwtAuth, imported with node:crypto alone (jose is not loaded: check-config
// imports a configuration file's key through this too, and must not need that optional peer),
// with the `alg` values its type verifies.
import { KeyObject, createPublicKey } from 'node:crypto';
import type { JsonWebKeyInput } from 'node:crypto';
import { cut } from '../../peer/option-rules.js';
import { jwtDefaults } from './jwt-options.js';
import type { ResolvedJwtOptions } from './jwt-options.js';
import type { JwtContext } from './claims-context.js';

/** What `publicKey` may be given as. */
const KEY_FORMS = 'a PEM public key, a JWK, a KeyObject or a CryptoKey';

/** Algorithms each public key type can verify. */
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

/**
 * One public key: imported once (a private key given by mistake is reduced to its public
 * half), and the algorithms checked against its type, so that a token's `alg` can never make
 * the key be used another way (an HS256 token "signed" with an RSA public key as its secret).
 */
export function importPublicKey(
  given: NonNullable<ResolvedJwtOptions<JwtContext>['key'] & { kind: 'publicKey' }>['publicKey'],
  algorithms: readonly string[] | undefined,
  /** What the key may be given as, for the refusal (a configuration file has no KeyObject). */
  forms = KEY_FORMS,
): { key: KeyObject; algorithms: readonly string[] } {
  let key: KeyObject;
  try {
    const object =
      typeof CryptoKey !== 'undefined' && given instanceof CryptoKey
        ? KeyObject.from(given)
        : given;
    if (object instanceof KeyObject) {
      key = object.type === 'public' ? object : createPublicKey(object);
    } else if (typeof object === 'string') key = createPublicKey(object);
    else key = createPublicKey({ key: object, format: 'jwk' } as JsonWebKeyInput);
  } catch (err) {
    throw new TypeError(`publicKey must be ${forms}: ${cut((err as Error).message)}`, {
      cause: err,
    });
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
  return { key, algorithms: chosen };
}
