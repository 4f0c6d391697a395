/**
 * docs/recipes/react-app.md runs as written: its blocks (`contract.ts`, `server.ts`, `app.tsx`)
 * are written out, type-checked together (JSX, `wsrpc-gateway` and its entries mapped onto this
 * tree's src/), the page bundled as the recipe's esbuild command does, the server run as a process
 * and the page loaded in Chromium: it shows a message sent before it loaded (the history call), one
 * it sends (its mutation, seen by a Node client on the same contract) and one sent from Node
 * afterwards (the live subscription), in that order and each once.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useContract } from '../../src/client/contract-client.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { thisPackage } from '../support/bundle.js';
import { spawnServer } from '../support/demo-process.js';
import { freePort } from '../support/network.js';
import {
  buildForNode,
  recipeDir,
  importRecipeContract,
  recipeBlocks,
  recipeTypeErrors,
  waitForRecipeServer,
} from '../support/recipes.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

const missing = browserMissing();
if (missing) console.warn(`[recipe-react] the page is not run: ${missing}`);

const dir = recipeDir('recipe-react');

let server: string;

beforeAll(async () => {
  mkdirSync(join(dir, 'public'), { recursive: true });
  const blocks = recipeBlocks('recipes/react-app.md', {
    'contract.ts': '// contract.ts:',
    'server.ts': '// server.ts:',
    'app.tsx': '// app.tsx:',
  });
  for (const [file, code] of Object.entries(blocks)) writeFileSync(join(dir, file), code);
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
  await buildForNode(join(dir, 'server.ts'), server);
}, 60_000);

describe('docs/recipes/react-app.md', { timeout: 60_000 }, () => {
  // A whole program over src/: minutes on a loaded machine; the time is no claim.
  it('type-checks as written', () => {
    expect(recipeTypeErrors(dir, ['contract.ts', 'server.ts', 'app.tsx'])).toEqual([]);
  }, 180_000);

  it.skipIf(missing !== undefined)(
    'runs: the server, the page in Chromium, and a Node client on the same contract',
    async () => {
      const port = await freePort();
      const { child, output, exited } = spawnServer(server, port);
      res.children.push(child);
      await waitForRecipeServer(port, () => child.exitCode !== null, output);

      const url = `ws://127.0.0.1:${port}/rpc`;
      const chat = await importRecipeContract(dir, 'chat');
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
