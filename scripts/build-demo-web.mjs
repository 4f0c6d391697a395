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

await build({
  entryPoints: ['demo/web/app.ts'],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  outfile: 'dist/demo-web/app.js',
  plugins: [clientBuild],
  logLevel: 'warning',
});
mkdirSync('dist/demo-web', { recursive: true });
for (const file of ['index.html', 'style.css']) {
  copyFileSync(`demo/web/${file}`, `dist/demo-web/${file}`);
}
console.log('demo page: dist/demo-web (index.html, style.css, app.js)');
