// Bundles the browser entry of the client and fails if anything in it reaches
// for a Node built-in or the `ws` package: the client must run in a browser as is.
import { build } from 'esbuild';
import { builtinModules } from 'node:module';
import { gzipSync } from 'node:zlib';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fallbackOnDemand } from './fallback-on-demand.mjs';

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

/** How every bundle here is built: for browsers, ESM, minified, in memory. */
const forBrowsers = {
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  write: false,
};

/** Bundle `contents` (a module's text) the same way: its minified and gzipped sizes. */
async function sizeOf(contents, loader, options) {
  const out = await build({
    ...forBrowsers,
    stdin: { contents, resolveDir: process.cwd(), loader },
    ...options,
  });
  const bundled = out.outputFiles[0].contents;
  return { bytes: bundled.length, gz: gzipSync(bundled).length };
}

const result = await build({
  ...forBrowsers,
  entryPoints: ['src/client/index.ts'],
  sourcemap: true,
  metafile: true,
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
const alone = await sizeOf("export { createClient } from './src/client/index.ts';", 'ts', {
  conditions: ['es2015'],
  logLevel: 'warning',
});
console.log(`createClient alone (tree-shaken): ${kib(alone.bytes)}, ${kib(alone.gz)} gzipped`);

// The yardstick: socket.io-client bundled the same way (browser, ESM, minified), when installed.
try {
  const peer = await sizeOf("export { io } from 'socket.io-client';", 'js', {
    logLevel: 'silent',
  });
  const ratio = (ours) => `${(ours / peer.gz).toFixed(2)}x`;
  console.log(
    `socket.io-client, same build: ${kib(peer.bytes)}, ${kib(peer.gz)} gzipped (whole client entry ${ratio(gz)}, createClient alone ${ratio(alone.gz)})`,
  );
} catch (err) {
  // socket.io-client is a devDependency; a production install has no yardstick.
  console.log(`socket.io-client not bundled for comparison: ${err.message.split('\n')[0]}`);
}

// One connection for every tab (wsrpc-gateway/client/shared): the SharedWorker script, one
// classic script with the whole client in it, and what a tab ships for createSharedClient. The
// tab's per-tab fallback (the worker's side, run in the tab) is a dynamic import, so the tab's
// figure is without it; a bundler that splits code loads it only where SharedWorker is missing.
offenders.length = 0;
const worker = await build({
  ...forBrowsers,
  stdin: {
    contents: "import { shareClient } from './src/client/shared/index.ts';\nshareClient();",
    resolveDir: process.cwd(),
    loader: 'ts',
  },
  format: 'iife',
  sourcemap: true,
  outfile: 'dist/browser/shared-worker.js',
  conditions: ['es2015'],
  plugins: [guard],
  logLevel: 'warning',
});
if (offenders.length > 0) {
  console.error(`The shared worker pulls in Node-only modules:\n  ${offenders.join('\n  ')}`);
  process.exit(1);
}
for (const file of worker.outputFiles) writeFileSync(file.path, file.contents);
const workerJs = worker.outputFiles.find((f) => f.path.endsWith('.js')).contents;
const tab = await sizeOf(
  "export { createSharedClient } from './src/client/shared/index.ts';",
  'ts',
  {
    conditions: ['es2015'],
    plugins: [fallbackOnDemand],
    logLevel: 'warning',
  },
);
console.log(
  `with the SharedWorker: dist/browser/shared-worker.js ${kib(workerJs.length)}, ${kib(gzipSync(workerJs).length)} gzipped; createSharedClient in a tab ${kib(tab.bytes)}, ${kib(tab.gz)} gzipped (its per-tab fallback loaded on demand)`,
);

// With the React bindings (wsrpc-gateway/react): createClient and every hook, React itself left
// out (the app ships it anyway); the difference over createClient alone is what the hooks add.
const withReact = await sizeOf(
  "export { createClient } from './src/client/index.ts';\nexport * from './src/react/index.ts';",
  'ts',
  { conditions: ['es2015'], external: ['react', 'react-dom'], logLevel: 'warning' },
);
console.log(
  `with the React bindings (react external): ${kib(withReact.bytes)}, ${kib(withReact.gz)} gzipped (${kib(withReact.gz - alone.gz)} over createClient alone)`,
);
