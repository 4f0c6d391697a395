// jwtAuth's options are checked when it is called: each mistake a TypeError or RangeError that
// names the option and what it may be.
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { jwtAuth, jwtDefaults } from '../../src/jwt.js';
import type { JwtAuthOptions } from '../../src/jwt.js';
import { SECRET } from './jwt-fixtures.js';

const refusedWith = (options: unknown): Error => {
  try {
    jwtAuth(options as JwtAuthOptions);
  } catch (err) {
    return err as Error;
  }
  throw new Error('the options were taken');
};

describe('jwtAuth options', () => {
  it('has its defaults in one object', () => {
    expect(jwtDefaults).toMatchObject({
      jwksTimeoutMs: 5_000,
      jwksCooldownMs: 30_000,
      jwksCacheMaxAgeMs: 600_000,
      clockToleranceSec: 30,
      claims: { user: 'sub', topics: 'topics', methods: 'methods' },
    });
  });

  it('needs exactly one key source', () => {
    expect(refusedWith({})).toEqual(
      new TypeError('jwtAuth needs exactly one of secret, publicKey, jwks, jwksUrl'),
    );
    expect(refusedWith({ secret: SECRET, jwksUrl: 'https://x.example/jwks' })).toEqual(
      new TypeError(
        'jwtAuth needs exactly one of secret, publicKey, jwks, jwksUrl, not secret and jwksUrl',
      ),
    );
  });

  it('refuses each bad value naming the option', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const cases: [unknown, Error][] = [
      [
        { secret: 'short' },
        new RangeError('secret must be at least 32 bytes (256 bits, RFC 7518), not shorter'),
      ],
      [
        { secret: 42 },
        new TypeError('secret must be a string or a Uint8Array of at least 32 bytes, not a number'),
      ],
      [
        { jwks: { keys: 'x' } },
        new TypeError(
          'jwks must be a JSON Web Key Set { keys: [...] }, not {"keys":"a string of 1 characters"}',
        ),
      ],
      [
        { jwksUrl: 'http://keys.example.com/jwks' },
        new RangeError(
          'jwksUrl must be an https: URL (http: only on localhost, 127.0.0.1 or [::1]), not "http://keys.example.com/jwks"',
        ),
      ],
      [
        { jwksUrl: 'not a url' },
        new TypeError(
          'jwksUrl must be an https: URL (http: only on localhost, 127.0.0.1 or [::1]), not "not a url"',
        ),
      ],
      [
        { secret: SECRET, algorithms: ['none'] },
        new RangeError(
          'algorithms may hold HS256, HS384, HS512 with secret ("none" is never accepted), not "none"',
        ),
      ],
      [
        { secret: SECRET, algorithms: ['RS256'] },
        new RangeError('algorithms may hold HS256, HS384, HS512 with secret, not "RS256"'),
      ],
      [
        { publicKey, algorithms: ['RS256'] },
        new RangeError('algorithms for this publicKey (ec) may be ES256, not ["RS256"]'),
      ],
      [
        { jwks: { keys: [] }, algorithms: ['HS256'] },
        new RangeError(
          'algorithms may hold RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519 with jwks, not "HS256"',
        ),
      ],
      [
        { publicKey: 'not a pem' },
        expect.objectContaining({
          name: 'TypeError',
          message: expect.stringMatching(
            /^publicKey must be a PEM public key, a JWK, a KeyObject or a CryptoKey: /,
          ),
        }) as Error,
      ],
      [
        { secret: SECRET, clockToleranceSec: -1 },
        new RangeError('clockToleranceSec must be a number from 0 to 3600, not -1'),
      ],
      [
        { secret: SECRET, jwksTimeoutMs: 0 },
        new RangeError('jwksTimeoutMs must be an integer from 1 to 2147483647, not 0'),
      ],
      [
        { secret: SECRET, issuer: '' },
        new TypeError('issuer must be a non-empty string or a non-empty array of strings, not ""'),
      ],
      [
        { secret: SECRET, claims: { user: '' } },
        new TypeError('claims.user must be a non-empty string, not ""'),
      ],
      [
        { secret: SECRET, claims: { role: 'x' } },
        new TypeError('claims.role is not an option of jwtAuth claims'),
      ],
      [
        { secret: SECRET, audiance: 'x' },
        new TypeError('audiance is not an option of jwtAuth (did you mean audience?)'),
      ],
    ];
    for (const [options, error] of cases) expect(refusedWith(options)).toEqual(error);
  });
});
