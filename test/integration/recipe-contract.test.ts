/**
 * docs/recipes/sharing-a-contract.md runs as written: its blocks (`contract.ts`, `server.ts`,
 * `page.ts` and the types-only `page.ts`) are written out, type-checked together, bundled as
 * the page says (`wsrpc-gateway` is this tree's src/index.ts, `wsrpc-gateway/client` its
 * src/client/index.ts; zod and the rest are the installed packages), the server run as a
 * process and both pages in Chromium, against it and against a Node client using the same
 * contract. The bundle-size claims are checked against the same bundles.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useContract } from '../../src/client/contract-client.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { spawnServer } from '../support/demo-process.js';
import { freePort, httpGet } from '../support/network.js';
import {
  buildForNode,
  recipeDir,
  importRecipeContract,
  recipeBlocks,
  recipeTypeErrors,
  waitForRecipeServer,
} from '../support/recipes.js';
import { Resources } from '../support/resources.js';
import { thisPackage } from '../support/bundle.js';

const res = new Resources();
afterEach(() => res.cleanup());

const missing = browserMissing();
if (missing) console.warn(`[recipe-contract] the pages are not run: ${missing}`);

const dir = recipeDir('recipe-contract');

/** Bundle `file` (in `dir`) for the browser as the recipe's esbuild command does; its bytes. */
async function bundlePage(file: string, outfile: string): Promise<Uint8Array> {
  const out = await build({
    entryPoints: [join(dir, file)],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    minify: true,
    outfile,
    write: false,
    plugins: [thisPackage],
    logLevel: 'silent',
  });
  const bytes = out.outputFiles[0]!.contents;
  mkdirSync(join(dir, 'public'), { recursive: true });
  writeFileSync(outfile, bytes);
  return bytes;
}

let blocks: Record<'contract' | 'server' | 'page' | 'typesOnly', string>;
let page: Uint8Array;
let typesOnly: Uint8Array;
let server: string;

beforeAll(async () => {
  blocks = recipeBlocks('recipes/sharing-a-contract.md', {
    contract: '// contract.ts:',
    server: '// server.ts:',
    page: '// page.ts:',
    typesOnly: '// page.ts, types only:',
  });
  mkdirSync(join(dir, 'types-only'), { recursive: true });
  writeFileSync(join(dir, 'contract.ts'), blocks.contract);
  writeFileSync(join(dir, 'server.ts'), blocks.server);
  writeFileSync(join(dir, 'page.ts'), blocks.page);
  // Both pages are page.ts importing ./contract.js: the second one in a folder of its own.
  writeFileSync(join(dir, 'types-only', 'contract.ts'), blocks.contract);
  writeFileSync(join(dir, 'types-only', 'page.ts'), blocks.typesOnly);
  page = await bundlePage('page.ts', join(dir, 'public', 'page.js'));
  typesOnly = await bundlePage(join('types-only', 'page.ts'), join(dir, 'types-only.js'));
  server = join(dir, 'server.mjs');
  await buildForNode(join(dir, 'server.ts'), server);
}, 60_000);

describe('docs/recipes/sharing-a-contract.md', { timeout: 60_000 }, () => {
  // A whole program over src/: minutes on a loaded machine; the time is no claim.
  it('type-checks as written', () => {
    const errors = recipeTypeErrors(dir, [
      'contract.ts',
      'server.ts',
      'page.ts',
      join('types-only', 'page.ts'),
    ]);
    expect(errors).toEqual([]);
  }, 180_000);

  it('ships no validator in the types-only page, and zod/mini in the other', () => {
    const gz = (bytes: Uint8Array) => gzipSync(bytes).length;
    const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
    // zod/mini's error messages are in the validating page only.
    expect(text(page)).toContain('Invalid input');
    expect(text(typesOnly)).not.toContain('Invalid input');
    // "about 8 KB gzipped": the page over the types-only one, which is the client alone.
    const over = gz(page) - gz(typesOnly);
    expect(over).toBeGreaterThan(4_000);
    expect(over).toBeLessThan(12_000);
  });

  it('runs: the server, the page in a browser, and a Node client on the same contract', async () => {
    const port = await freePort();
    const { child, output, exited } = spawnServer(server, port);
    res.children.push(child);
    await waitForRecipeServer(port, () => child.exitCode !== null, output);

    // A Node client, typed and validated by the very contract the recipe defines.
    const chat = await importRecipeContract(dir, 'chat');
    const { api } = useContract(res.client(`ws://127.0.0.1:${port}/rpc`), chat);
    const send = api['send'] as (params: unknown) => Promise<number>;
    const history = api['history'] as (params: unknown) => Promise<{ text: string }[]>;
    expect(await send(['lobby', 'from node'])).toBe(1);
    expect((await history({ room: 'lobby' })).map((m) => m.text)).toEqual(['from node']);
    const page = await httpGet(`http://127.0.0.1:${port}/`);
    expect(page.body).toContain('<script type="module" src="/page.js"></script>');

    if (!missing) await runPages(port, send);

    expect(child.kill('SIGTERM')).toBe(true);
    const { code } = await exited;
    expect({ code, output: code === 0 ? '' : output() }).toEqual({ code: 0, output: '' });
  });
});

/** Both pages in Chromium: what they log, and what they get of messages sent from Node. */
async function runPages(port: number, send: (params: unknown) => Promise<number>) {
  let browser: Browser | undefined;
  try {
    browser = await launchChromium();
    const tab = await browser.newPage();
    const logged: string[] = [];
    tab.on('console', (message) => logged.push(message.text()));
    tab.on('pageerror', (err) => logged.push(`page error: ${err.message}`));
    const sentByPage = tab.waitForEvent('console', {
      predicate: (m) => m.text().startsWith('sent #'),
      timeout: 15_000,
    });
    await tab.goto(`http://127.0.0.1:${port}/`);
    expect((await sentByPage).text()).toBe('sent #2; lobby: from node | hello from the page');

    // The page's subscription: a message sent from Node shows in its log (sent again until the
    // subscription, which the page made without waiting for it, is live).
    await untilSeen(
      () => tab.locator('#log').innerText(),
      'again from node',
      () => send(['lobby', 'again from node']),
    );

    // The types-only page, in the same tab: typed by the contract, none of it shipped.
    const typesOnlySent = tab.waitForEvent('console', {
      predicate: (m) => m.text().startsWith('types only: sent #'),
      timeout: 15_000,
    });
    await tab.addScriptTag({ content: Buffer.from(typesOnly).toString('utf8'), type: 'module' });
    expect((await typesOnlySent).text()).toMatch(
      /^types only: sent #\d+; lobby: from node \| hello from the page \| (again from node \| )+hello, types only$/,
    );
    await untilSeen(
      () => Promise.resolve(logged.join('\n')),
      'types only got: third from node',
      () => send(['lobby', 'third from node']),
    );
    expect(logged.filter((line) => line.startsWith('page error'))).toEqual([]);
  } finally {
    await browser?.close();
  }
}

async function untilSeen(read: () => Promise<string>, text: string, poke: () => Promise<unknown>) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await poke();
    await new Promise((resolve) => setTimeout(resolve, 100));
    if ((await read()).includes(text)) return;
    if (Date.now() > deadline) throw new Error(`never saw "${text}"`);
  }
}
