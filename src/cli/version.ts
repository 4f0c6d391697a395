import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The package's name and version, from the package.json next to dist (dist/src/cli/ -> ../../../). */
export function readVersion(): string {
  try {
    const file = fileURLToPath(new URL('../../../package.json', import.meta.url));
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
    const name = typeof pkg.name === 'string' ? pkg.name : 'wsrpc';
    return typeof pkg.version === 'string' ? `${name} ${pkg.version}` : `${name} (unknown version)`;
  } catch {
    return 'wsrpc (unknown version)';
  }
}
