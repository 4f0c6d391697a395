// A refusal of a value under a secret-bearing path (serverApi.keys, jwt.secret, ...) tells the
// value's type and length, never the value, and a refused URL is shown with its userinfo and
// query masked: check-config's stderr (and serve's log, the same message) lands in CI logs.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'check-config-secret-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SECRET = 'S3cr3t-0123456789abcdef-0123456789';

it.each([
  ['serverApi.keys given a string', 'serverApi:\n  path: /api\n  keys: ${API_KEY}\n'],
  ['jwt.secret given a list', 'jwt:\n  secret: ["${API_KEY}"]\n'],
  [
    'upstream URL with credentials',
    'upstreams:\n  o:\n    url: "http://svc:${API_KEY}@127.0.0.1:9/rpc"\nmethods:\n  "o.*": o\n',
  ],
  ['malformed broker URL', 'broker:\n  kind: redis\n  url: "redis//:${API_KEY}@host:6379"\n'],
])('%s: refused without printing the secret', (name, text) => {
  const path = join(dir, `${name.replace(/\W+/g, '-')}.yaml`);
  writeFileSync(path, text);
  const result = spawnSync(process.execPath, [cli, 'check-config', path], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, API_KEY: SECRET },
  });
  expect(result.status).toBe(1);
  expect(result.stderr).not.toContain(SECRET);
  expect(result.stderr).toMatch(
    /(serverApi\.keys|jwt\.secret|upstreams\.o\.url|broker\.url) must be/,
  );
});
