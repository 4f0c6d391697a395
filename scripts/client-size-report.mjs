// What `createClient` alone ships, module by module: the bundle an app gets when it imports
// only createClient from wsrpc-gateway/client (esbuild, browser, ESM, minified, es2022, as
// scripts/bundle-client.mjs builds it), with the bytes each input contributes to the output.
//
//   node scripts/client-size-report.mjs [--entry "<module text>"] [--all] [--gz]
//
// --entry bundles another page instead (e.g. "export { createClient, inbox } from
// './src/client/index.ts';"); --all lists every input, not only those above 200 bytes; --write
// <file> keeps the bundle, to read what is in it. --gz adds a column: the gzipped bytes each
// input costs, the whole bundle gzipped less the same bundle gzipped without that input's code.
// The two columns rank differently (gzip takes repeated names and words almost for free), and
// the gzipped figure is the one the bound in test/client/bundle-size.test.ts holds.
import { build } from 'esbuild';
import { readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const args = process.argv.slice(2);
const entryAt = args.indexOf('--entry');
const entry =
  entryAt >= 0 ? args[entryAt + 1] : "export { createClient } from './src/client/index.ts';";
const all = args.includes('--all');
const withGz = args.includes('--gz');
const writeAt = args.indexOf('--write');

const options = {
  stdin: { contents: entry, resolveDir: process.cwd(), loader: 'ts', sourcefile: 'page.ts' },
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  write: false,
  metafile: true,
  outdir: 'out',
  // rxjs ships an ES2015 build under this condition; the default one is ES5, with helpers.
  conditions: ['es2015'],
  logLevel: 'warning',
};
const out = await build(options);

/**
 * By input path (as the metafile names it), the gzipped bytes its code costs: the same build
 * with a marker comment opening each input (esbuild keeps `/*!` comments where they are), cut
 * at the markers; the bundle gzipped, less the bundle gzipped without that input's pieces.
 */
async function gzShares() {
  const marker = (path) => `/*! @input ${path} */`;
  const marked = await build({
    ...options,
    metafile: false,
    legalComments: 'inline',
    plugins: [
      {
        name: 'mark-inputs',
        setup(b) {
          b.onLoad({ filter: /\.[cm]?[jt]s$/ }, (load) => ({
            contents: `${marker(load.path.slice(process.cwd().length + 1))}\n${readFileSync(load.path, 'utf8')}`,
            loader: load.path.endsWith('.ts') ? 'ts' : 'js',
          }));
        },
      },
    ],
  });
  const pieces = marked.outputFiles[0].text.split(/(?=\/\*! @input )/);
  const pathOf = (piece) => /^\/\*! @input (\S+) \*\//.exec(piece)?.[1];
  const strip = (text) => text.replace(/\/\*! @input \S+ \*\/\n?/g, '');
  const whole = gzipSync(strip(pieces.join(''))).length;
  const shares = new Map();
  for (const path of new Set(pieces.map(pathOf))) {
    if (path === undefined) continue;
    const without = pieces.filter((piece) => pathOf(piece) !== path).join('');
    shares.set(path, whole - gzipSync(strip(without)).length);
  }
  return shares;
}
const shares = withGz ? await gzShares() : undefined;

const js = out.outputFiles.find((f) => f.path.endsWith('.js'));
if (writeAt >= 0) writeFileSync(args[writeAt + 1], js.contents);
const [output] = Object.values(out.metafile.outputs);
const rows = Object.entries(output.inputs)
  .map(([path, { bytesInOutput }]) => [
    path.replace(/^node_modules\//, ''),
    bytesInOutput,
    shares?.get(path) ?? 0,
  ])
  .filter(([, bytes]) => all || bytes >= 200)
  .sort((a, b) => (withGz ? b[2] - a[2] : b[1] - a[1]));

const rxjs = Object.entries(output.inputs)
  .filter(([path]) => path.includes('node_modules/rxjs/'))
  .reduce((sum, [, { bytesInOutput }]) => sum + bytesInOutput, 0);

const width = Math.max(...rows.map(([path]) => path.length));
const gzColumn = (bytes) => (withGz ? ` ${String(bytes).padStart(6)}` : '');
if (withGz) console.log(`${'input'.padEnd(width)} ${'min'.padStart(6)} ${'gz'.padStart(6)}`);
for (const [path, bytes, gz] of rows) {
  console.log(`${path.padEnd(width)} ${String(bytes).padStart(6)}${gzColumn(gz)}`);
}
const rxjsGz = [...(shares ?? [])]
  .filter(([path]) => path.includes('node_modules/rxjs/'))
  .reduce((sum, [, bytes]) => sum + bytes, 0);
console.log(
  `${'(rxjs, all modules)'.padEnd(width)} ${String(rxjs).padStart(6)}${gzColumn(rxjsGz)}`,
);
const gz = gzipSync(js.contents).length;
console.log(
  `total: ${js.contents.length} bytes minified, ${gz} bytes gzipped (${(gz / 1024).toFixed(2)} KiB)`,
);
