// `static.dir` as serve loads it: sizes are checked before a byte is read (a file over the budget,
// even one larger than Node can read at once, is refused with the static.dir message), a symlink
// is served only when it leads to a file inside the folder, and each file has a strong ETag that
// If-None-Match answers with 304.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { serve } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { MAX_STATIC_BYTES, staticFilesHandler } from '../../src/standalone/static-files.js';

const root = mkdtempSync(join(tmpdir(), 'static-files-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A fresh folder under the test's root, with `files` written (name to text). */
function folder(name: string, files: Record<string, string> = {}): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

/** Serve `dir` on a free port for `run`, then close. */
async function serving(dir: string, run: (base: string) => Promise<void>): Promise<void> {
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0 },
    static: { dir },
  });
  const server = await serve(config, { logger: silentLogger });
  try {
    await run(`http://127.0.0.1:${server.address.port}`);
  } finally {
    await server.close();
  }
}

/** Status and body of a GET of `url`. */
async function get(url: string, headers: Record<string, string> = {}) {
  const answer = await fetch(url, { headers });
  return { status: answer.status, body: await answer.text(), headers: answer.headers };
}

describe('static.dir sizes', () => {
  const overBudget = (dir: string): string =>
    `static.dir: ${dir} holds more than ${MAX_STATIC_BYTES} bytes (64 MiB), the most its files may hold together`;

  it('a file larger than Node reads at once (3 GiB, sparse) is refused by its size', () => {
    const dir = folder('huge', { 'index.html': 'page' });
    writeFileSync(join(dir, 'huge.bin'), '');
    truncateSync(join(dir, 'huge.bin'), 3 * 1024 ** 3);
    expect(() => staticFilesHandler(dir)).toThrow(overBudget(dir));
  });

  it('files over the budget together are refused, one just at it is served', () => {
    const dir = folder('budget', { 'index.html': 'page' });
    writeFileSync(join(dir, 'a.bin'), '');
    truncateSync(join(dir, 'a.bin'), MAX_STATIC_BYTES - 'page'.length);
    expect(() => staticFilesHandler(dir)).not.toThrow();
    writeFileSync(join(dir, 'b.bin'), 'x');
    expect(() => staticFilesHandler(dir)).toThrow(overBudget(dir));
  });
});

describe('static.dir symlinks', () => {
  it('served when they lead inside the folder, skipped (404) when they lead outside', async () => {
    const outside = folder('outside', { 'secret.txt': 'SECRET' });
    const dir = folder('links/web', { 'index.html': 'page', 'inside.txt': 'INSIDE' });
    folder('links/web/sub', { 'deep.txt': 'DEEP' });
    symlinkSync(join(dir, 'inside.txt'), join(dir, 'to-inside.txt'));
    symlinkSync('sub', join(dir, 'to-sub'));
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'to-secret.txt'));
    symlinkSync('../../outside', join(dir, 'to-outside'));
    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    symlinkSync(join(dir, 'missing.txt'), join(dir, 'broken.txt'));
    // A link to the folder itself: read once, not without end.
    symlinkSync('.', join(dir, 'loop'));
    await serving(dir, async (base) => {
      expect((await get(`${base}/to-inside.txt`)).body).toBe('INSIDE');
      expect((await get(`${base}/to-sub/deep.txt`)).body).toBe('DEEP');
      for (const path of ['/to-secret.txt', '/to-outside/secret.txt', '/passwd', '/broken.txt']) {
        const { status } = await get(`${base}${path}`);
        expect(`${path} ${status}`).toBe(`${path} 404`);
      }
    });
  });
});

describe('static.dir ETag', () => {
  it('a strong ETag per file; If-None-Match with it is 304 without a body, GET and HEAD', async () => {
    const dir = folder('etag', { 'index.html': 'page', 'other.txt': 'other' });
    await serving(dir, async (base) => {
      const first = await get(`${base}/`);
      const etag = first.headers.get('etag');
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(first.headers.get('cache-control')).toBe('no-cache');
      expect((await get(`${base}/index.html`)).headers.get('etag')).toBe(etag);
      expect((await get(`${base}/other.txt`)).headers.get('etag')).not.toBe(etag);
      for (const match of [etag!, `W/${etag!}`, `"nope", ${etag!}`, '*']) {
        for (const method of ['GET', 'HEAD']) {
          const answer = await fetch(`${base}/`, { method, headers: { 'if-none-match': match } });
          const body = await answer.text();
          expect({ match, method, status: answer.status, body }).toEqual({
            match,
            method,
            status: 304,
            body: '',
          });
          expect(answer.headers.get('etag')).toBe(etag);
          expect(answer.headers.get('cache-control')).toBe('no-cache');
        }
      }
      const changed = await get(`${base}/`, { 'if-none-match': '"something-else"' });
      expect({ status: changed.status, body: changed.body }).toEqual({ status: 200, body: 'page' });
    });
  });
});
