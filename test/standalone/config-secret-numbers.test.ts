// A secret of digits given unquoted (`secret: ${JWT_SECRET}`) is a YAML number; refused, it is
// told as "a number", never by its digits: check-config's stderr and serve's log land in CI logs.
// The built CLI (`npm run build` first) in a child process, as a user runs it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { describe as describeValue } from '../../src/peer/option-rules.js';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'config-secret-numbers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function checkConfig(name: string, text: string, env: Record<string, string>) {
  const path = join(dir, name);
  writeFileSync(path, text);
  const result = spawnSync(process.execPath, [cli, 'check-config', path], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, ...env },
  });
  return { code: result.status, stderr: result.stderr, path };
}

it.each([
  ['jwt.secret', '98273645019283746501928374650192837465', '98273', 'jwt:\n  secret: ${SECRET}\n'],
  [
    'serverApi.keys[0]',
    '1234567890123456',
    '1234567890123456',
    'serverApi:\n  path: /api\n  keys:\n    - ${SECRET}\n',
  ],
  [
    'serverApi.keys[0]',
    '0x7f3a9c2e1b4d5f60',
    '9167811713306550000',
    'serverApi:\n  path: /api\n  keys:\n    - ${SECRET}\n',
  ],
  [
    'tls.passphrase',
    '20240917',
    '20240917',
    'tls:\n  certFile: c.pem\n  keyFile: k.pem\n  passphrase: ${SECRET}\n',
  ],
])(
  '%s given %s unquoted: refused as "a number", its digits nowhere',
  (at, secret, digits, text) => {
    const { code, stderr, path } = checkConfig(`${at.replace(/\W+/g, '-')}.yaml`, text, {
      SECRET: secret,
    });
    expect(code).toBe(1);
    expect(stderr).toContain(`${path}: ${at} must be `);
    expect(stderr).toContain(', not a number\n');
    expect(stderr).not.toContain(secret);
    expect(stderr).not.toContain(digits);
    expect(stderr).not.toMatch(/e\+\d/);
  },
);

it('describe: a number under a secret path is told by its type; elsewhere, and booleans, shown', () => {
  expect(describeValue(1234567890123456, 'serverApi.keys[0]')).toBe('a number');
  expect(describeValue(12345678901234567890n, 'jwt.secret')).toBe('a bigint');
  expect(describeValue({ password: 20240917 }, 'broker')).toBe('{"password":"a number"}');
  expect(describeValue(true, 'jwt.secret')).toBe('true');
  expect(describeValue(null, 'jwt.secret')).toBe('null');
  expect(describeValue(8080, 'listen.port')).toBe('8080');
});
