// A YAML `!!set` (a JS Set) or `!!omap` (a JS Map) where a section (a mapping) is expected is
// refused, naming the key: `limits: !!set {maxBatch}`, `listen: !!set {port}`, `topics: !!set
// {...}` and `limits: !!omap [...]` are not taken as empty sections meaning the defaults.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'check-config-set-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it.each([
  ['limits', 'limits: !!set { maxBatch }\n'],
  ['listen', 'listen: !!set { port }\n'],
  ['topics', 'topics: !!set { "chat.*" }\n'],
  // A Map (!!omap) likewise: maxBatch 0, out of range, is never seen.
  ['limits', 'limits: !!omap [ { maxBatch: 0 } ]\n'],
])('%s given as a YAML !!set or !!omap is refused, not taken as empty', (key, text) => {
  const path = join(dir, `${key}-${text.length}.yaml`);
  writeFileSync(path, text);
  const result = spawnSync(process.execPath, [cli, 'check-config', path], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect(result.stdout).not.toContain('ok:');
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(key);
});
