// Whatever a client puts where the token goes, jwtAuth's authenticate either accepts it or
// refuses it with an UpgradeRejection of 401 (503 only for a key set it cannot have): random
// strings, random base64url segments, headers and claims of random JSON, and valid tokens
// mutated a character at a time.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import {
  AUDIENCE,
  ISSUER,
  SECRET,
  b64url,
  signHs256,
  signWith,
  signingKey,
  withToken,
} from './jwt-fixtures.js';

type Auth = ReturnType<typeof jwtAuth>;

/** 'accepted', or the refusal's status; anything else thrown fails the property. */
async function outcome(auth: Auth, token: string): Promise<'accepted' | number> {
  try {
    await auth.authenticate(withToken(token));
    return 'accepted';
  } catch (err) {
    if (!(err instanceof UpgradeRejection)) throw err;
    expect(err.message).toMatch(
      /^(token |signature|unknown key|audience|issuer|algorithm|malformed|missing claim)/,
    );
    return err.status;
  }
}

const base64urlSegment = fc
  .uint8Array({ maxLength: 96 })
  .map((bytes) => Buffer.from(bytes).toString('base64url'));
const jsonSegment = fc.jsonValue({ maxDepth: 3 }).map((value) => b64url(value));
const headerSegment = fc
  .record(
    {
      alg: fc.constantFrom('HS256', 'RS256', 'ES256', 'EdDSA', 'none', 'NONE', 'HS512', ''),
      kid: fc.string({ maxLength: 12 }),
      typ: fc.constantFrom('JWT', 'at+jwt', 'x'),
      crit: fc.array(fc.string({ maxLength: 5 }), { maxLength: 2 }),
      b64: fc.boolean(),
    },
    { requiredKeys: ['alg'] },
  )
  .map((header) => b64url(header));

describe('the token input, fuzzed', () => {
  let auths: Auth[];
  let valid: string[];
  beforeAll(async () => {
    const es = await signingKey('ES256', 'es');
    const ed = await signingKey('EdDSA', 'ed');
    const checks = { issuer: ISSUER, audience: AUDIENCE };
    auths = [
      jwtAuth({ secret: SECRET, ...checks }),
      jwtAuth({ jwks: { keys: [es.publicJwk, ed.publicJwk] }, ...checks }),
    ];
    valid = [await signHs256(), await signWith(es), await signWith(ed)];
  });

  const never = (tokens: fc.Arbitrary<string>) =>
    fc.assert(
      fc.asyncProperty(tokens, async (token) => {
        for (const auth of auths) expect([401, 'accepted']).toContain(await outcome(auth, token));
      }),
      { numRuns: 300 },
    );

  it('random strings', () => never(fc.string({ maxLength: 300, unit: 'binary' })));

  it('three random base64url segments, and JSON ones', () =>
    never(
      fc
        .tuple(
          fc.oneof(base64urlSegment, jsonSegment, headerSegment),
          fc.oneof(base64urlSegment, jsonSegment),
          base64urlSegment,
          fc.integer({ min: 1, max: 5 }),
        )
        .map(([a, b, c, parts]) => [a, b, c, c, c].slice(0, parts).join('.')),
    ));

  it('valid tokens mutated: a character changed, removed or added, or segments swapped', () =>
    fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 2 }),
        fc.nat(),
        fc.constantFrom('change', 'remove', 'add', 'swap'),
        fc.string({ minLength: 1, maxLength: 1 }),
        async (which, at, how, char) => {
          const token = valid[which]!;
          const i = at % token.length;
          const [h, p, s] = token.split('.');
          const mutated =
            how === 'change'
              ? token.slice(0, i) + char + token.slice(i + 1)
              : how === 'remove'
                ? token.slice(0, i) + token.slice(i + 1)
                : how === 'add'
                  ? token.slice(0, i) + char + token.slice(i)
                  : `${p}.${h}.${s}`;
          for (const auth of auths) {
            const result = await outcome(auth, mutated);
            expect([401, 'accepted']).toContain(result);
            // A signature covers every byte: a changed token is accepted only if it decodes the same.
            if (result === 'accepted' && mutated !== token) {
              const decoded = (t: string) =>
                t.split('.').map((part) => Buffer.from(part, 'base64url').toString('hex'));
              expect(decoded(mutated)).toEqual(decoded(token));
            }
          }
        },
      ),
      { numRuns: 400 },
    ));
});
