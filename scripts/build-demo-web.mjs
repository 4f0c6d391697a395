// Builds the demo page into dist/demo-web: app.js bundled from demo/web/app.ts, with the
// client left out (the page loads the browser build, /client.js, like any user would),
// and the page's HTML and CSS copied as they are.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';

const clientBuild = {
  name: 'client-from-browser-build',
  setup(b) {
    b.onResolve({ filter: /src\/client\/index\.js$/ }, () => ({
      path: '/client.js',
      external: true,
    }));
  },
};

// What both pages are built with: a minified ES module for current browsers, with its map.
const page = {
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  logLevel: 'warning',
};

await build({
  ...page,
  entryPoints: ['demo/web/app.ts'],
  outfile: 'dist/demo-web/app.js',
  plugins: [clientBuild],
});
mkdirSync('dist/demo-web', { recursive: true });
for (const file of ['index.html', 'style.css']) {
  copyFileSync(`demo/web/${file}`, `dist/demo-web/${file}`);
}
console.log('demo page: dist/demo-web (index.html, style.css, app.js)');

// The React variant (demo/react, served at /react): React's production build, the client and
// wsrpc-gateway/react in one module, as an app's bundler would make it.
await build({
  ...page,
  entryPoints: ['demo/react/app.ts'],
  conditions: ['es2015'],
  define: { 'process.env.NODE_ENV': '"production"' },
  outfile: 'dist/demo-web/react.js',
});
copyFileSync('demo/react/index.html', 'dist/demo-web/react.html');
console.log('demo page in React: dist/demo-web (react.html, react.js)');
