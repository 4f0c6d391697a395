import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { BuildOptions } from 'esbuild';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Bundle one TypeScript entry under test/ with the current src/ into a runnable ES module in a
 * temporary directory (esbuild, a dev dependency; no type check, which `tsc --noEmit` does).
 * Packages stay external and are found through a node_modules symlink, so dist/ is neither read
 * nor written. `options` adds to the build (source maps, defines...).
 */
export async function bundleForNode(
  entry: string,
  options: BuildOptions = {},
): Promise<{ script: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'wsrpc-bundle-'));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const script = join(dir, 'main.mjs');
  await build({
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile: script,
    logLevel: 'error',
    ...options,
  });
  return { script, dir };
}
