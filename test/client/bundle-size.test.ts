/*
 * What an app that imports only createClient ships, built as scripts/bundle-client.mjs measures
 * it (esbuild: browser, ESM, minified, es2022, rxjs's es2015 build), gzipped: at most
 * CREATE_CLIENT_GZIP_BYTES, and without the code only a server runs (its peer's draining, rate
 * limit and authorize, prefix routes) or rxjs beyond Observable. A change that grows it fails
 * here, naming the bytes each module adds; `node scripts/client-size-report.mjs` prints them too.
 */
import { build } from 'esbuild';
import type { Plugin } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { fallbackOnDemand } from '../../scripts/fallback-on-demand.mjs';

/** The bound, in bytes gzipped; docs/performance.md gives the figure it was set from. */
const CREATE_CLIENT_GZIP_BYTES = 24_626;

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Modules (or folders) the browser client must not carry: what only a server or the CLI uses. */
const serverOnly = [
  'src/peer/peer.ts',
  'src/peer/incoming-dispatch.ts',
  'src/peer/answering-peer.ts',
  // The binary codecs' frame conversions (64-bit ids and all): reached only through a codec.
  'src/encoding/',
  'rxjs/dist/esm/internal/Subject.js',
  'rxjs/dist/esm/internal/BehaviorSubject.js',
  'rxjs/dist/esm/internal/operators/',
];

/** An app's bundle of `entry` as scripts/bundle-client.mjs builds it: gzipped bytes, minified bytes per module. */
async function bundled(
  entry: string,
  plugins: Plugin[] = [],
): Promise<{ gz: number; inputs: [string, number][] }> {
  const out = await build({
    stdin: { contents: entry, resolveDir: root, loader: 'ts' },
    plugins,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    write: false,
    metafile: true,
    outdir: 'out',
    conditions: ['es2015'],
    logLevel: 'error',
  });
  const js = out.outputFiles.find((f) => f.path.endsWith('.js'))!;
  const [output] = Object.values(out.metafile.outputs);
  const inputs = Object.entries(output!.inputs)
    .map(([path, { bytesInOutput }]): [string, number] => [
      path.replace(/^node_modules\//, ''),
      bytesInOutput,
    ])
    .filter(([, bytes]) => bytes > 0)
    .sort((a, b) => b[1] - a[1]);
  return { gz: gzipSync(js.contents).length, inputs };
}

const createClientAlone = () => bundled("export { createClient } from './src/client/index.ts';");

describe('createClient alone, as a browser app bundles it', () => {
  it(`is at most ${CREATE_CLIENT_GZIP_BYTES} bytes gzipped, and carries no server-only module`, async () => {
    const { gz, inputs } = await createClientAlone();
    const carried = inputs.map(([path]) => path);
    for (const module of serverOnly) {
      expect(carried.filter((path) => path.startsWith(module))).toEqual([]);
    }
    const perModule = inputs.map(([path, bytes]) => `${path} ${bytes}`).join('\n');
    expect(gz, `createClient alone, minified bytes per module:\n${perModule}`).toBeLessThanOrEqual(
      CREATE_CLIENT_GZIP_BYTES,
    );
  });
});

describe('createSharedClient in a tab, as a browser app bundles it', () => {
  it('carries none of the client itself: the per-tab fallback (the client, in the tab) is loaded on demand', async () => {
    const { inputs } = await bundled(
      "export { createSharedClient } from './src/client/shared/index.ts';",
      [fallbackOnDemand],
    );
    const carried = inputs.map(([path]) => path);
    for (const module of [
      'src/client/client.ts',
      'src/client/client-connection.ts',
      'src/client/subscriptions.ts',
      'src/peer/peer-core.ts',
    ]) {
      expect(carried).not.toContain(module);
    }
  });
});
