import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { build } from 'esbuild';
import type { BuildOptions, Plugin } from 'esbuild';

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

/** Each package entry ("wsrpc-gateway", "wsrpc-gateway/jwt", ...) and its source file under src/. */
function entrySources(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, { types: string } | string>;
  };
  const sources = new Map<string, string>();
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    // A file served as it is (the shared worker's script, package.json): no module to map.
    if (typeof target === 'string') continue;
    // ./dist/src/client/index.d.ts -> src/client/index.ts
    const source = target.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts');
    sources.set(subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`, join(root, source));
  }
  return sources;
}

/**
 * An esbuild plugin that resolves this package's own entries to this source tree, so code written
 * as a user writes it (`import { createGateway } from 'wsrpc-gateway'`) runs against src/.
 */
export const thisPackage: Plugin = {
  name: 'this-package',
  setup(b) {
    const sources = entrySources();
    b.onResolve({ filter: /^wsrpc-gateway(\/.*)?$/ }, (args) => {
      const path = sources.get(args.path);
      return path === undefined ? undefined : { path };
    });
  },
};
