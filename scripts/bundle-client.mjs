// Bundles the browser entry of the client and fails if anything in it reaches
// for a Node built-in or the `ws` package: the client must run in a browser as is.
import { build } from 'esbuild';
import { builtinModules } from 'node:module';
import { gzipSync } from 'node:zlib';
import { mkdirSync, writeFileSync } from 'node:fs';

const forbidden = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`), 'ws']);
const offenders = [];

const guard = {
  name: 'no-node-in-browser',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (forbidden.has(args.path) || args.path.startsWith('node:')) {
        offenders.push(`${args.path} (imported from ${args.importer})`);
        return { path: args.path, external: true };
      }
      return undefined;
    });
  },
};

const result = await build({
  entryPoints: ['src/client/index.ts'],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  metafile: true,
  write: false,
  outdir: 'dist/browser',
  entryNames: 'client',
  plugins: [guard],
  logLevel: 'warning',
});

if (offenders.length > 0) {
  console.error(`The browser client pulls in Node-only modules:\n  ${offenders.join('\n  ')}`);
  process.exit(1);
}

mkdirSync('dist/browser', { recursive: true });
for (const file of result.outputFiles) writeFileSync(file.path, file.contents);
const js = result.outputFiles.find((f) => f.path.endsWith('.js'));
const gz = gzipSync(js.contents).length;
console.log(
  `browser client: dist/browser/client.js ${(js.contents.length / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzipped`,
);
