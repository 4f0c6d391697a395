/**
 * docs/recipes/react-app.md runs as written: its blocks (`contract.ts`, `server.ts`, `app.tsx`)
 * are written out, type-checked together (JSX, `wsrpc-gateway` and its entries mapped onto this
 * tree's src/), the page bundled as the recipe's esbuild command does, the server run as a process
 * and the page loaded in Chromium: it shows a message sent before it loaded (the history call), one
 * it sends (its mutation, seen by a Node client on the same contract) and one sent from Node
 * afterwards (the live subscription), in that order and each once.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import ts from 'typescript';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useContract } from '../../src/client/contract-client.js';
import type { Contract } from '../../src/contract/contract.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { thisPackage } from '../support/bundle.js';
import { root, spawnServer } from '../support/demo-process.js';
import { freePort, httpGet } from '../support/network.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

const missing = browserMissing();
if (missing) console.warn(`[recipe-react] the page is not run: ${missing}`);

// Under node_modules, so the bundles' bare imports (react, zod/mini, ws...) resolve as installed.
const dir = join(root, 'node_modules', '.cache', `wsrpc-recipe-react-${process.pid}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The recipe's blocks by the file their first line names. */
function recipeBlocks(): Record<'contract.ts' | 'server.ts' | 'app.tsx', string> {
  const markdown = readFileSync(join(root, 'docs', 'recipes', 'react-app.md'), 'utf8');
  const blocks = [...markdown.matchAll(/```tsx?\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const named = (file: string) => {
    const block = blocks.find((b) => b.startsWith(`// ${file}:`));
    if (!block) throw new Error(`no block starting "// ${file}:" in the recipe`);
    return block;
  };
  return {
    'contract.ts': named('contract.ts'),
    'server.ts': named('server.ts'),
    'app.tsx': named('app.tsx'),
  };
}

/** Type errors of the files in `dir`, with `wsrpc-gateway` and its entries mapped onto src/. */
function typeErrors(files: string[]): string[] {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), (p) => ts.sys.readFile(p));
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram(
    files.map((f) => join(dir, f)),
    {
      ...options,
      noEmit: true,
      jsx: ts.JsxEmit.ReactJSX,
      baseUrl: root,
      paths: {
        'wsrpc-gateway': ['src/index.ts'],
        'wsrpc-gateway/client': ['src/client/index.ts'],
        'wsrpc-gateway/react': ['src/react/index.ts'],
      },
    },
  );
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName.startsWith(dir))
    .map((d) => `${d.file!.fileName}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

let server: string;

beforeAll(async () => {
  mkdirSync(join(dir, 'public'), { recursive: true });
  for (const [file, code] of Object.entries(recipeBlocks())) writeFileSync(join(dir, file), code);
  // npx esbuild app.tsx --bundle --format=esm --minify --jsx=automatic --outfile=public/app.js
  await build({
    entryPoints: [join(dir, 'app.tsx')],
    bundle: true,
    format: 'esm',
    minify: true,
    jsx: 'automatic',
    outfile: join(dir, 'public', 'app.js'),
    plugins: [thisPackage],
    logLevel: 'silent',
  });
  server = join(dir, 'server.mjs');
  await build({
    entryPoints: [join(dir, 'server.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outfile: server,
    plugins: [thisPackage],
    logLevel: 'silent',
  });
}, 60_000);

/** The recipe's contract.ts as a module this process can import. */
async function contractForNode(): Promise<Contract> {
  const outfile = join(dir, 'contract.mjs');
  await build({
    entryPoints: [join(dir, 'contract.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile,
    plugins: [thisPackage],
    logLevel: 'silent',
  });
  return ((await import(outfile)) as { chat: Contract }).chat;
}

async function waitForLivez(port: number, exited: () => boolean, output: () => string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited()) throw new Error(`the recipe's server exited before it listened:\n${output()}`);
    const answer = await httpGet(`http://127.0.0.1:${port}/livez`).catch(() => undefined);
    if (answer?.status === 200) return;
    if (Date.now() > deadline) throw new Error('the recipe never answered /livez');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('docs/recipes/react-app.md', { timeout: 60_000 }, () => {
  it('type-checks as written', () => {
    expect(typeErrors(['contract.ts', 'server.ts', 'app.tsx'])).toEqual([]);
  });

  it.skipIf(missing !== undefined)(
    'runs: the server, the page in Chromium, and a Node client on the same contract',
    async () => {
      const port = await freePort();
      const { child, output, exited } = spawnServer(server, port);
      res.children.push(child);
      await waitForLivez(port, () => child.exitCode !== null, output);

      const url = `ws://127.0.0.1:${port}/rpc`;
      const chat = await contractForNode();
      const node = res.client(url);
      const { api, subscribe } = useContract(node, chat);
      const send = api['send'] as (params: unknown) => Promise<number>;
      const fromPage: string[] = [];
      subscribe('room.lobby').subscribe((m) => fromPage.push((m as { text: string }).text));
      expect(await send({ room: 'lobby', text: 'before the page' })).toBe(1);

      let browser: Browser | undefined;
      try {
        browser = await launchChromium();
        const tab = await browser.newPage();
        const errors: string[] = [];
        tab.on('pageerror', (error) => errors.push(error.message));
        await tab.goto(`http://127.0.0.1:${port}/`);
        const wait = { timeout: 15_000 };
        await tab.locator('#connection', { hasText: 'open' }).waitFor(wait);
        await tab.locator('#messages li', { hasText: 'before the page' }).waitFor(wait);
        await tab.locator('#room-status', { hasText: 'subscribed' }).waitFor(wait);

        await tab.fill('#text', 'from the page');
        await tab.click('button');
        await tab.locator('#messages li', { hasText: 'from the page' }).waitFor(wait);
        await expect.poll(() => fromPage, wait).toContain('from the page');

        await send({ room: 'lobby', text: 'after the page' });
        await tab.locator('#messages li', { hasText: 'after the page' }).waitFor(wait);
        expect(await tab.locator('#messages li').allInnerTexts()).toEqual([
          'before the page',
          'from the page',
          'after the page',
        ]);
        expect(errors).toEqual([]);
      } finally {
        await browser?.close();
      }

      expect(child.kill('SIGTERM')).toBe(true);
      const { code } = await exited;
      expect({ code, output: code === 0 ? '' : output() }).toEqual({ code: 0, output: '' });
    },
  );
});
