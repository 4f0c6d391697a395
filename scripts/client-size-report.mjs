// What `createClient` alone ships, module by module: the bundle an app gets when it imports
// only createClient from wsrpc-gateway/client (esbuild, browser, ESM, minified, es2022, as
// scripts/bundle-client.mjs builds it), with the bytes each input contributes to the output.
//
//   node scripts/client-size-report.mjs [--entry "<module text>"] [--all]
//
// --entry bundles another page instead (e.g. "export { createClient, inbox } from
// './src/client/index.ts';"); --all lists every input, not only those above 200 bytes; --write
// <file> keeps the bundle, to read what is in it.
import { build } from 'esbuild';
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const args = process.argv.slice(2);
const entryAt = args.indexOf('--entry');
const entry =
  entryAt >= 0 ? args[entryAt + 1] : "export { createClient } from './src/client/index.ts';";
const all = args.includes('--all');
const writeAt = args.indexOf('--write');

const out = await build({
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
});

const js = out.outputFiles.find((f) => f.path.endsWith('.js'));
if (writeAt >= 0) writeFileSync(args[writeAt + 1], js.contents);
const [output] = Object.values(out.metafile.outputs);
const rows = Object.entries(output.inputs)
  .map(([path, { bytesInOutput }]) => [path.replace(/^node_modules\//, ''), bytesInOutput])
  .filter(([, bytes]) => all || bytes >= 200)
  .sort((a, b) => b[1] - a[1]);

const rxjs = Object.entries(output.inputs)
  .filter(([path]) => path.includes('node_modules/rxjs/'))
  .reduce((sum, [, { bytesInOutput }]) => sum + bytesInOutput, 0);

const width = Math.max(...rows.map(([path]) => path.length));
for (const [path, bytes] of rows) console.log(`${path.padEnd(width)} ${String(bytes).padStart(6)}`);
console.log(`${'(rxjs, all modules)'.padEnd(width)} ${String(rxjs).padStart(6)}`);
const gz = gzipSync(js.contents).length;
console.log(
  `total: ${js.contents.length} bytes minified, ${gz} bytes gzipped (${(gz / 1024).toFixed(2)} KiB)`,
);
