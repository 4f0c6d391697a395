// `static.dir` files are served at their URL paths however a browser escapes them: a file named
// `logo@2x.png` at /logo@2x.png (browsers send `@`, `+`, `,`, `;`, `=`, `:` and `$` unencoded in a
// path) and at /logo%402x.png alike, a name with a space at /a%20b.txt; a path that is not valid
// percent-encoding names no file (404).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { serve } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';

const dir = mkdtempSync(join(tmpdir(), 'static-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('files are served at their paths however they are escaped', async () => {
  writeFileSync(join(dir, 'index.html'), '<img src="logo@2x.png">');
  writeFileSync(join(dir, 'logo@2x.png'), 'PNG');
  writeFileSync(join(dir, 'a b.txt'), 'spaced');
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0 },
    static: { dir },
  });
  const server = await serve(config, { logger: silentLogger });
  try {
    const base = `http://127.0.0.1:${server.address.port}`;
    const index = await fetch(`${base}/`);
    expect(index.status).toBe(200);
    await index.text();
    // What a browser requests for <img src="logo@2x.png"> on that page:
    const asked = new URL('logo@2x.png', `${base}/`).href;
    const logo = await fetch(asked);
    await logo.text();
    expect(`${asked} ${logo.status}`).toBe(`${asked} 200`);
    for (const path of ['/logo%402x.png', '/a%20b.txt']) {
      const answer = await fetch(`${base}${path}`);
      expect(`${path} ${answer.status} ${await answer.text()}`).toMatch(/ 200 (PNG|spaced)$/);
    }
    const broken = await fetch(`${base}/%E0%A4%A`);
    await broken.text();
    expect(broken.status).toBe(404);
  } finally {
    await server.close();
  }
});
