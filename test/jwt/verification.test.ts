// jwtAuth's verification: each algorithm accepted, each way a token fails refused with a 401 and
// a message saying why, the claims read into the session's context and the identity hooks.
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import type { JsonWebKeyInput } from 'node:crypto';
import { SignJWT, exportSPKI } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import {
  AUDIENCE,
  ISSUER,
  SECRET,
  b64url,
  now,
  refusal,
  signHs256,
  signWith,
  signingKey,
  unsecured,
  validClaims,
  withToken,
} from './jwt-fixtures.js';
import type { SigningKey } from './jwt-fixtures.js';

const checks = { issuer: ISSUER, audience: AUDIENCE };

describe('jwtAuth accepts', () => {
  it('HS256 with a shared secret', async () => {
    const auth = jwtAuth({ secret: SECRET, ...checks });
    const context = await auth.authenticate(withToken(await signHs256()));
    expect(context).toMatchObject({ user: 'alice', claims: { iss: ISSUER } });
  });

  for (const alg of ['RS256', 'ES256', 'EdDSA']) {
    it(`${alg} with its public key (PEM) and in a key set`, async () => {
      const key = await signingKey(alg);
      const token = await signWith(key);
      const byPem = jwtAuth({ publicKey: await exportSPKI(key.publicKey), ...checks });
      expect((await byPem.authenticate(withToken(token))).user).toBe('alice');
      const bySet = jwtAuth({ jwks: { keys: [key.publicJwk] }, ...checks });
      expect((await bySet.authenticate(withToken(token))).user).toBe('alice');
    });
  }

  it('a public key as a JWK, a KeyObject or a CryptoKey', async () => {
    const key = await signingKey('ES256');
    const token = await signWith(key);
    for (const publicKey of [
      key.publicJwk,
      createPublicKey({ key: key.publicJwk, format: 'jwk' } as JsonWebKeyInput),
      key.publicKey,
    ]) {
      const auth = jwtAuth({ publicKey, ...checks });
      expect((await auth.authenticate(withToken(token))).user).toBe('alice');
    }
  });

  it('the token from the Bearer header, a cookie or a subprotocol when no token is handed over', async () => {
    const token = await signHs256();
    const auth = jwtAuth({ secret: SECRET, cookie: 'jwt', protocolPrefix: 'bearer.' });
    const base = { token: undefined, headers: {}, cookies: {}, protocols: [] };
    const places = [
      { ...base, headers: { authorization: `Bearer ${token}` } },
      { ...base, headers: { authorization: `bearer  ${token}` } },
      { ...base, cookies: { jwt: token } },
      { ...base, protocols: ['jsonrpc-2.0', `bearer.${token}`] },
    ];
    for (const request of places) expect((await auth.authenticate(request)).user).toBe('alice');
    expect(await refusal(auth.authenticate(base))).toEqual({
      status: 401,
      message: 'token required',
    });
  });
});

describe('jwtAuth reads the claims into the context', () => {
  it('user, expiry, issue time, topics and methods; the identity hooks read them', async () => {
    const exp = now() + 600;
    const iat = now() - 5;
    const auth = jwtAuth({ secret: SECRET, clockToleranceSec: 10 });
    const context = await auth.authenticate(
      withToken(
        await signHs256(
          validClaims({ exp, iat, topics: ['chat.*', 'news'], methods: 'orders.list orders.get' }),
        ),
      ),
    );
    expect(context).toEqual({
      user: 'alice',
      expiresAt: exp * 1000,
      issuedAt: iat * 1000,
      topics: ['chat.*', 'news'],
      methods: ['orders.list', 'orders.get'],
      claims: expect.objectContaining({ sub: 'alice', exp, iat }),
    });
    expect({
      user: auth.userOf(context),
      expiresAt: auth.identity.expiresAtOf(context),
      issuedAt: auth.identity.issuedAtOf(context),
      topics: auth.identity.topicsOf(context),
      methods: auth.identity.methodsOf(context),
    }).toEqual({
      user: 'alice',
      expiresAt: (exp + 10) * 1000, // accepted until then, with the tolerance
      issuedAt: iat * 1000,
      topics: ['chat.*', 'news'],
      methods: ['orders.list', 'orders.get'],
    });
  });

  it('no topics or methods claim: no restriction from the token (undefined)', async () => {
    const auth = jwtAuth({ secret: SECRET });
    const context = await auth.authenticate(
      withToken(await signHs256(validClaims({ iat: undefined }))),
    );
    expect({
      topics: auth.identity.topicsOf(context),
      methods: auth.identity.methodsOf(context),
      issuedAt: auth.identity.issuedAtOf(context),
    }).toEqual({ topics: undefined, methods: undefined, issuedAt: undefined });
  });

  it('claim names of its own, and a context mapper', async () => {
    const auth = jwtAuth({
      secret: SECRET,
      claims: { user: 'email', topics: 'rooms', methods: 'scope' },
      context: (claims, identity) => ({ ...identity, tenant: String(claims['tenant']) }),
    });
    const context = await auth.authenticate(
      withToken(
        await signHs256(
          validClaims({ email: 'a@example.com', rooms: ['r1'], scope: 'read', tenant: 't1' }),
        ),
      ),
    );
    expect(context).toMatchObject({
      user: 'a@example.com',
      topics: ['r1'],
      methods: ['read'],
      tenant: 't1',
    });
    expect(auth.userOf(context)).toBe('a@example.com');
  });
});

describe('jwtAuth refuses, with a 401 saying why', () => {
  let rsa: SigningKey;
  let es: SigningKey;
  let keySetAuth: ReturnType<typeof jwtAuth>;
  beforeAll(async () => {
    rsa = await signingKey('RS256', 'rsa-1');
    es = await signingKey('ES256', 'es-1');
    keySetAuth = jwtAuth({ jwks: { keys: [rsa.publicJwk, es.publicJwk] }, ...checks });
  });
  const secretAuth = jwtAuth({ secret: SECRET, ...checks });
  const refused = (message: string) => ({ status: 401, message });

  it('a wrong signature (another secret; another key under the same kid)', async () => {
    const otherSecret = await signHs256(validClaims(), 'another-secret-of-at-least-32-bytes!!');
    expect(await refusal(secretAuth.authenticate(withToken(otherSecret)))).toEqual(
      refused('signature invalid'),
    );
    const impostor = await signingKey('ES256', es.kid);
    expect(await refusal(keySetAuth.authenticate(withToken(await signWith(impostor))))).toEqual(
      refused('signature invalid'),
    );
    // A token whose signature was altered.
    const token = await signWith(es);
    const [head, body, signature] = token.split('.');
    const altered = `${head}.${body}.${signature!.startsWith('A') ? 'B' : 'A'}${signature!.slice(1)}`;
    expect(await refusal(keySetAuth.authenticate(withToken(altered)))).toEqual(
      refused('signature invalid'),
    );
  });

  it('alg none, with a secret and with keys', async () => {
    for (const auth of [secretAuth, keySetAuth]) {
      expect(await refusal(auth.authenticate(withToken(unsecured())))).toEqual(
        refused('algorithm not allowed'),
      );
    }
  });

  it('algorithm confusion: an HS256 token keyed with the RSA public key itself', async () => {
    const pem = await exportSPKI(rsa.publicKey);
    const confused = await signHs256(validClaims(), new TextEncoder().encode(pem));
    const byPem = jwtAuth({ publicKey: pem, ...checks });
    expect(await refusal(byPem.authenticate(withToken(confused)))).toEqual(
      refused('algorithm not allowed'),
    );
    expect(await refusal(keySetAuth.authenticate(withToken(confused)))).toEqual(
      refused('algorithm not allowed'),
    );
    // An ES256 token against an RSA key: not an algorithm of that key.
    const byRsa = jwtAuth({ publicKey: pem, ...checks });
    expect(await refusal(byRsa.authenticate(withToken(await signWith(es))))).toEqual(
      refused('algorithm not allowed'),
    );
  });

  it('an algorithm outside the allow-list', async () => {
    const only = jwtAuth({ jwks: { keys: [rsa.publicJwk, es.publicJwk] }, algorithms: ['RS256'] });
    expect(await refusal(only.authenticate(withToken(await signWith(es))))).toEqual(
      refused('algorithm not allowed'),
    );
  });

  it('expired, beyond the clock tolerance and within it', async () => {
    const expiredLongAgo = await signHs256(validClaims({ exp: now() - 60 }));
    expect(await refusal(secretAuth.authenticate(withToken(expiredLongAgo)))).toEqual(
      refused('token expired'),
    );
    const expiredJustNow = await signHs256(validClaims({ exp: now() - 5 }));
    expect((await secretAuth.authenticate(withToken(expiredJustNow))).user).toBe('alice');
    const strict = jwtAuth({ secret: SECRET, clockToleranceSec: 0 });
    expect(await refusal(strict.authenticate(withToken(expiredJustNow)))).toEqual(
      refused('token expired'),
    );
  });

  it('not yet valid (nbf), beyond the clock tolerance and within it', async () => {
    const later = await signHs256(validClaims({ nbf: now() + 120 }));
    expect(await refusal(secretAuth.authenticate(withToken(later)))).toEqual(
      refused('token not yet valid'),
    );
    const soon = await signHs256(validClaims({ nbf: now() + 10 }));
    expect((await secretAuth.authenticate(withToken(soon))).user).toBe('alice');
    const strict = jwtAuth({ secret: SECRET, ...checks, clockToleranceSec: 0 });
    expect(await refusal(strict.authenticate(withToken(soon)))).toEqual(
      refused('token not yet valid'),
    );
  });

  it('a wrong audience or issuer, and a missing exp, sub or aud', async () => {
    const cases = {
      audience: await signHs256(validClaims({ aud: 'https://other.example.com' })),
      issuer: await signHs256(validClaims({ iss: 'https://evil.example.com' })),
      noExp: await signHs256(validClaims({ exp: undefined })),
      noSub: await signHs256(validClaims({ sub: undefined })),
      noAud: await signHs256(validClaims({ aud: undefined })),
      numericSub: await signHs256({ ...validClaims(), sub: 42 as unknown as string }),
      loneSurrogateSub: await signHs256(validClaims({ sub: 'al\ud800ice' })),
      badTopics: await signHs256(validClaims({ topics: ['ok', 7] })),
    };
    const outcomes: Record<string, unknown> = {};
    for (const [name, token] of Object.entries(cases)) {
      outcomes[name] = (await refusal(secretAuth.authenticate(withToken(token)))).message;
    }
    expect(outcomes).toEqual({
      audience: 'audience mismatch',
      issuer: 'issuer mismatch',
      noExp: 'missing claim "exp"',
      noSub: 'missing claim "sub"',
      noAud: 'missing claim "aud"',
      numericSub: 'malformed claim "sub"',
      loneSurrogateSub: 'malformed claim "sub"',
      badTopics: 'malformed claim "topics"',
    });
  });

  it('a token several keys of the set fit (one kid on the old and the new key; no kid): the key that signed it verifies it', async () => {
    const old = await signingKey('ES256', 'rotating');
    const fresh = await signingKey('ES256', 'rotating');
    const stranger = await signingKey('ES256', 'rotating');
    const rotating = jwtAuth({ jwks: { keys: [old.publicJwk, fresh.publicJwk] }, ...checks });
    for (const key of [old, fresh]) {
      expect((await rotating.authenticate(withToken(await signWith(key)))).user).toBe('alice');
    }
    expect(await refusal(rotating.authenticate(withToken(await signWith(stranger))))).toEqual(
      refused('signature invalid'),
    );
    const unnamed = (key: typeof old) => {
      const { kid: _kid, ...jwk } = key.publicJwk;
      return jwk;
    };
    const withoutKids = jwtAuth({ jwks: { keys: [unnamed(old), unnamed(fresh)] }, ...checks });
    const noKid = await new SignJWT(validClaims())
      .setProtectedHeader({ alg: 'ES256' })
      .sign(fresh.privateKey);
    expect((await withoutKids.authenticate(withToken(noKid))).user).toBe('alice');
    // An expired token signed by one of them is refused for its expiry, not its signature.
    const expired = await signWith(
      fresh,
      validClaims({ exp: Math.floor(Date.now() / 1000) - 600 }),
    );
    expect(await refusal(rotating.authenticate(withToken(expired)))).toEqual(
      refused('token expired'),
    );
  });

  it('a kid that is not in the set', async () => {
    const stranger = await signingKey('ES256', 'not-in-the-set');
    expect(await refusal(keySetAuth.authenticate(withToken(await signWith(stranger))))).toEqual(
      refused('unknown key id'),
    );
  });

  it('garbage: not a JWT, bad base64, a header that is not JSON, too long', async () => {
    const garbage = [
      'not-a-jwt',
      'a.b.c',
      '...',
      `${b64url('not json')}.${b64url({})}.sig`,
      `${b64url({ alg: 'HS256' })}.${b64url('[1,2]')}.sig`,
      `${b64url({ alg: 'HS256' })}.!!!.sig`,
      `${b64url({ alg: 'HS256', crit: ['x'] })}.${b64url(validClaims())}.sig`,
      `${b64url({ alg: 'HS256' })}.${b64url(validClaims())}`,
    ];
    for (const token of garbage) {
      const { status, message } = await refusal(secretAuth.authenticate(withToken(token)));
      expect({ token, status }).toEqual({ token, status: 401 });
      expect(['malformed token', 'signature invalid', 'algorithm not allowed']).toContain(message);
    }
    expect(await refusal(secretAuth.authenticate(withToken('x'.repeat(20_000))))).toEqual(
      refused('token too long'),
    );
  });

  it('says what the token lacked in WWW-Authenticate (RFC 6750)', async () => {
    const err = await secretAuth
      .authenticate(withToken(await signHs256(validClaims({ exp: now() - 600 }))))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpgradeRejection);
    expect((err as UpgradeRejection).headers).toEqual({
      'WWW-Authenticate': 'Bearer error="invalid_token", error_description="token expired"',
    });
  });

  it('a token signed by a newly generated RSA key under PS256 when only RS256 is allowed', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const token = await new SignJWT(validClaims())
      .setProtectedHeader({ alg: 'PS256' })
      .setExpirationTime(now() + 60)
      .sign(privateKey);
    const auth = jwtAuth({ publicKey, algorithms: ['RS256'] });
    expect(await refusal(auth.authenticate(withToken(token)))).toEqual(
      refused('algorithm not allowed'),
    );
    const ps = jwtAuth({ publicKey, algorithms: ['PS256'] });
    expect((await ps.authenticate(withToken(token))).user).toBe('alice');
  });
});
