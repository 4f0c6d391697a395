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
  // rxjs ships an ES2015 build under this condition; the default one is ES5, with helpers.
  conditions: ['es2015'],
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
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(
  `browser client: dist/browser/client.js ${kib(js.contents.length)}, ${kib(gz)} gzipped`,
);

// What an app that imports only createClient ships once its bundler drops the rest (contracts,
// protocol helpers): the figure to set beside socket.io-client's `io`.
const alone = await build({
  stdin: {
    contents: "export { createClient } from './src/client/index.ts';",
    resolveDir: process.cwd(),
    loader: 'ts',
  },
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  write: false,
  conditions: ['es2015'],
  logLevel: 'warning',
});
const aloneJs = alone.outputFiles[0].contents;
const aloneGz = gzipSync(aloneJs).length;
console.log(`createClient alone (tree-shaken): ${kib(aloneJs.length)}, ${kib(aloneGz)} gzipped`);

// The yardstick: socket.io-client bundled the same way (browser, ESM, minified), when installed.
try {
  const peer = await build({
    stdin: {
      contents: "export { io } from 'socket.io-client';",
      resolveDir: process.cwd(),
      loader: 'js',
    },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    write: false,
    logLevel: 'silent',
  });
  const peerJs = peer.outputFiles[0].contents;
  const peerGz = gzipSync(peerJs).length;
  const ratio = (ours) => `${(ours / peerGz).toFixed(2)}x`;
  console.log(
    `socket.io-client, same build: ${kib(peerJs.length)}, ${kib(peerGz)} gzipped (whole client entry ${ratio(gz)}, createClient alone ${ratio(aloneGz)})`,
  );
} catch (err) {
  // socket.io-client is a devDependency; a production install has no yardstick.
  console.log(`socket.io-client not bundled for comparison: ${err.message.split('\n')[0]}`);
}
