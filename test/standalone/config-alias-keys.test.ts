// YAML mapping keys that are aliases are refused at the first one, never expanded: each such key
// would otherwise be turned into an object key by expanding its anchor, once per key and outside
// the bound of 100 aliases (a 258 KB file of 1 600 alias keys to an anchor of 16 000 entries).
// The built CLI (`npm run build` first) as a user runs it, and loadConfigFile.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { ConfigFileError, loadConfigFile } from '../../src/standalone/config-file.js';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'config-alias-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const refusal = (path: string, at: string, alias: string): string =>
  `${path}:${at}: a key is an alias (*${alias}): a key of a configuration file is a name, never an alias, a list or a map`;

it('1 600 alias keys to an anchor of 16 000 entries: check-config refuses the first, exit 2', () => {
  const lines = ['base: &a', ...Array.from({ length: 16_000 }, (_, i) => `  k${i}: ${i}`), 'x:'];
  for (let j = 0; j < 1_600; j++) lines.push('  ? *a', `  : ${j}`);
  const path = join(dir, 'alias-keys.yaml');
  writeFileSync(path, `${lines.join('\n')}\n`);
  const result = spawnSync(process.execPath, [cli, 'check-config', path], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(result.stderr).toBe(`${refusal(path, '16003:5', 'a')}\n`);
  expect(result.status).toBe(2);
}, 70_000);

it.each([
  ['a block key', 'name: &n listen\n*n : { port: 1 }\n', '2:1', 'n'],
  ['an explicit key', 'name: &n listen\n? *n\n: { port: 1 }\n', '2:3', 'n'],
  ['a key in a flow mapping', 'name: &n listen\nother: { *n : 1 }\n', '2:10', 'n'],
  [
    'a key nested in a value',
    'topics:\n  chat: &t { history: { maxLength: 1 } }\n  more:\n    ? *t\n    : 1\n',
    '4:7',
    't',
  ],
])('%s that is an alias is refused at its line and column', async (_name, text, at, alias) => {
  const path = join(dir, `${at.replace(':', '-')}.yaml`);
  writeFileSync(path, text);
  const err = await loadConfigFile(path, {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigFileError);
  expect((err as ConfigFileError).kind).toBe('parse');
  expect((err as ConfigFileError).message).toBe(refusal(path, at, alias));
});

it('an alias as a value is still taken (within the bound of 100)', async () => {
  const path = join(dir, 'alias-value.yaml');
  writeFileSync(path, 'base: &p 8080\nlisten:\n  port: *p\n');
  expect(await loadConfigFile(path, {})).toEqual({ base: 8080, listen: { port: 8080 } });
});
