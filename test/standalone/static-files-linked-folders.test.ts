// static.dir with folders symlinked to one another: each folder path under the root counts against
// the bound of 1 000 folder paths, so folders that link twice to the next (2^N paths to the
// last) are refused at the bound, in bounded time, instead of being walked path by path; a
// folder linked once is still served at both paths; and content types for the usual web files.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { serve } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import {
  MAX_STATIC_FILES,
  MAX_STATIC_FOLDERS,
  staticDirProblem,
} from '../../src/standalone/static-files.js';

const root = mkdtempSync(join(tmpdir(), 'static-linked-folders-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * `name`/d0 holding d1 ... d`depth`, each d`i` with two symlinks (a, b) to d`i+1`: 2^(i-1)
 * paths lead to d`i`. No file but index.html.
 */
function linkedFolders(name: string, depth: number): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'd0'), { recursive: true });
  writeFileSync(join(dir, 'index.html'), '<p>x</p>');
  for (let i = 1; i <= depth; i++) mkdirSync(join(dir, 'd0', `d${i}`));
  for (let i = 1; i < depth; i++) {
    for (const link of ['a', 'b']) symlinkSync(`../d${i + 1}`, join(dir, 'd0', `d${i}`, link));
  }
  return dir;
}

const tooMany = (dir: string): string =>
  `static.dir: ${dir} holds more than ${MAX_STATIC_FOLDERS} folder paths (symlinks to folders included), the most it may hold`;

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

describe('static.dir: folders linked to one another', () => {
  it('2^15 paths through symlinked folders: refused at the bound of files and folders', () => {
    const dir = linkedFolders('deep', 16);
    expect(staticDirProblem({ static: { dir } }, root)).toBe(tooMany(dir));
  });

  it('more folders than the bound, with no file in them, are refused as files would be', () => {
    const dir = join(root, 'empty-folders');
    for (let i = 0; i <= MAX_STATIC_FOLDERS; i++)
      mkdirSync(join(dir, `f${i}`), { recursive: true });
    expect(staticDirProblem({ static: { dir } }, root)).toBe(tooMany(dir));
  });

  it('as many files as the bound at the root, and as many folders: served', () => {
    const dir = join(root, 'at-the-bounds');
    mkdirSync(dir);
    for (let i = 0; i < MAX_STATIC_FILES; i++) writeFileSync(join(dir, `p${i}.txt`), 'x');
    for (let i = 0; i < MAX_STATIC_FOLDERS; i++) mkdirSync(join(dir, `f${i}`));
    expect(staticDirProblem({ static: { dir } }, root)).toBeUndefined();
  });

  it('below the bound: served at every path the links make', async () => {
    const dir = linkedFolders('shallow', 4);
    writeFileSync(join(dir, 'd0', 'd4', 'leaf.txt'), 'LEAF');
    expect(staticDirProblem({ static: { dir } }, root)).toBeUndefined();
    await serving(dir, async (base) => {
      for (const path of ['/d0/d4/leaf.txt', '/d0/d1/a/a/a/leaf.txt', '/d0/d2/b/a/leaf.txt']) {
        const answer = await fetch(`${base}${path}`);
        expect(`${path} ${answer.status} ${await answer.text()}`).toBe(`${path} 200 LEAF`);
      }
    });
  });
});

describe('static.dir content types', () => {
  it.each([
    ['app.wasm', 'application/wasm'],
    ['photo.jpg', 'image/jpeg'],
    ['photo.JPEG', 'image/jpeg'],
    ['anim.gif', 'image/gif'],
    ['pic.webp', 'image/webp'],
    ['manifest.webmanifest', 'application/manifest+json'],
    ['data.bin', 'application/octet-stream'],
  ])('%s is served as %s', async (file, type) => {
    const dir = join(root, `types-${file}`);
    mkdirSync(dir);
    writeFileSync(join(dir, file), 'x');
    await serving(dir, async (base) => {
      const answer = await fetch(`${base}/${file}`);
      await answer.arrayBuffer();
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe(type);
    });
  });
});
