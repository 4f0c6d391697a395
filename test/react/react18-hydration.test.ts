/**
 * React 18, the oldest React the ./react entry supports (a peer range of ^18.2 || ^19): a
 * <ClientProvider options> page the server rendered is hydrated in place, its DOM kept (and
 * what the user typed in it before hydration ended), its effects mounted once. React 18 renders
 * the end of hydration before the provider's client exists, which React 19 does not, so this
 * runs the build under React 18 in a child process (test/react/react18/: its own install of
 * React 18, and a resolve hook that hands it to dist/ in place of the project's React 19).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const fixture = fileURLToPath(new URL('./react18/', import.meta.url));

/** The fixture's React 18, installed from its lockfile the first time. */
function installReact18(): void {
  if (existsSync(`${fixture}node_modules/react-dom/package.json`)) return;
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: fixture });
}

describe('ClientProvider under React 18', () => {
  it('hydrates what the server rendered in place, then connects', () => {
    installReact18();
    const out = execFileSync(process.execPath, ['--import', './register.mjs', 'hydrate.mjs'], {
      cwd: fixture,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(JSON.parse(out.trim().split('\n').at(-1)!)).toEqual({
      react: expect.stringMatching(/^18\./),
      shown: 'open 42',
      clientUser: true,
      inputKept: true,
      typed: 'typed before hydration ended',
      removed: [],
      effects: { mounted: 1, unmounted: 0 },
      recoverable: [],
    });
  }, 120_000);
});
