// The key of `jwt` and `serverApi.jwt` is imported when the file is checked, as jwtAuth imports it
// when serve starts: check-config refuses what serve would (a PEM or JWK that is no key, a key
// set's unusable key, algorithms the key does not verify), naming its path in the file, and serve
// refuses it in the same words before starting anything. The built CLI (`npm run build` first).
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runGatewayCommand } from './gateway-command.js';

const dir = mkdtempSync(join(tmpdir(), 'check-config-jwt-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ecPublicKey = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  .publicKey.export({ type: 'spki', format: 'pem' })
  .toString();

let files = 0;
function run(command: 'check-config' | 'serve', config: object) {
  const path = join(dir, `${files++}.json`);
  writeFileSync(path, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, ...config }));
  return runGatewayCommand(command, path);
}

const badEcJwk = { kty: 'EC', crv: 'P-256', x: 'bad', y: 'bad' };

it.each([
  [
    'a publicKey that is no key',
    { jwt: { publicKey: 'not a key', algorithms: ['ES256'] } },
    'jwt.publicKey must be a PEM public key or a JWK: ',
  ],
  [
    'a key set with a key that cannot be imported',
    { jwt: { jwks: { keys: [badEcJwk] }, algorithms: ['ES256'] } },
    'jwt.jwks.keys[0] must be a usable EC public key: ',
  ],
  [
    'a key set with an entry that is no object',
    { jwt: { jwks: { keys: ['key'] } } },
    'jwt.jwks.keys[0] must be a JSON Web Key (an object), not "key"',
  ],
  [
    'algorithms the key does not verify',
    { jwt: { publicKey: ecPublicKey, algorithms: ['RS256'] } },
    'jwt.algorithms for this publicKey (ec) may be ES256, not ["RS256"]',
  ],
  [
    "the server API's publicKey that is no key",
    { serverApi: { path: '/api', jwt: { publicKey: 'not a key', algorithms: ['ES256'] } } },
    'serverApi.jwt.publicKey must be a PEM public key or a JWK: ',
  ],
  [
    "the server API's key set with a key that cannot be imported",
    { serverApi: { path: '/api', jwt: { jwks: { keys: [badEcJwk] } } } },
    'serverApi.jwt.jwks.keys[0] must be a usable EC public key: ',
  ],
])('check-config: %s is a problem naming its path, exit 1', (_name, config, problem) => {
  const { code, stdout, stderr, path } = run('check-config', config);
  expect(stdout).toBe('');
  expect(stderr.split('\n')[0]).toContain(`${path}: ${problem}`);
  expect(stderr).toContain(`${path}: 1 problem\n`);
  expect(code).toBe(1);
});

it('check-config: a usable key (PEM, and the same as a JWK in a set) is ok, exit 0', () => {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  for (const config of [
    { jwt: { publicKey: ecPublicKey } },
    { jwt: { publicKey: jwk, algorithms: ['ES256'] } },
    {
      jwt: {
        jwks: {
          keys: [
            { ...jwk, kid: 'a' },
            { kty: 'oct', k: 'c2VjcmV0' },
          ],
        },
      },
    },
  ]) {
    const { code, stderr } = run('check-config', config);
    expect(stderr).toBe('');
    expect(code).toBe(0);
  }
});

it.each([
  ['jwt', { jwt: { publicKey: 'not a key', algorithms: ['ES256'] } }],
  [
    'serverApi.jwt',
    { serverApi: { path: '/api', jwt: { publicKey: 'not a key', algorithms: ['ES256'] } } },
  ],
])(
  'serve: a %s key that is no key is refused before anything starts, in the same words, exit 1',
  (section, config) => {
    const { code, stdout, stderr, path } = run('serve', config);
    expect(stdout).toBe('');
    expect(stderr).toMatch(
      new RegExp(
        `^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${section.replace('.', '\\.')}\\.publicKey must be a PEM public key or a JWK: [^\\n]*\\n$`,
      ),
    );
    expect(code).toBe(1);
  },
  30_000,
);
