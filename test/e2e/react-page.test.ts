/**
 * wsrpc-gateway/react in Chromium. A small React page (React's development build, so that
 * StrictMode mounts, unmounts and mounts again) bundled with esbuild from node_modules and this
 * tree, served next to a gateway: it renders a call's result and a subscription's messages as
 * they are published, and the gateway sees one session and one subscribe. Then the demo's React
 * page (/react, from the build) against the demo server as `npm start` runs it.
 */
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { thisPackage } from '../support/bundle.js';
import { ensureBuilt, root } from '../support/demo-process.js';
import { DemoServer } from '../support/demo-server.js';
import { startGateway } from '../support/gateway.js';
import { freePort } from '../support/network.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] React page tests skipped: ${missing}`);

const WAIT = { timeout: 15_000 };

const html = '<!doctype html><div id="root"></div><script type="module" src="/page.js"></script>';

/** The page, as an app would write it: JSX, the package's entries, React from node_modules. */
const pageSource = `
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { ClientProvider, useCall, useConnectionState, useSubscription } from 'wsrpc-gateway/react';

function App() {
  const { state } = useConnectionState();
  const sum = useCall('add', [20, 22]);
  const feed = useSubscription('feed', undefined, { history: 3 });
  return (
    <main>
      <p id="state">{state}</p>
      <p id="sum">{sum.loading ? 'loading' : String(sum.data)}</p>
      <p id="status">{feed.status.state}</p>
      <ul id="feed">{feed.history.map((m) => <li key={m}>{m}</li>)}</ul>
    </main>
  );
}

createRoot(document.getElementById('root')).render(
  <StrictMode>
    <ClientProvider options={{ url: 'ws://' + location.host + '/rpc' }}>
      <App />
    </ClientProvider>
  </StrictMode>,
);
`;

async function bundlePage(): Promise<string> {
  const out = await build({
    stdin: { contents: pageSource, resolveDir: root, loader: 'jsx', sourcefile: 'page.jsx' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'chrome110',
    jsx: 'automatic',
    // React's development build: StrictMode's double mount happens only there.
    define: { 'process.env.NODE_ENV': '"development"' },
    plugins: [thisPackage],
    write: false,
    logLevel: 'error',
  });
  return out.outputFiles[0]!.text;
}

const items = (page: Page) => page.locator('#feed li').allInnerTexts();

describe.skipIf(missing !== undefined)('a React page in Chromium', () => {
  let gateway: Gateway;
  let httpUrl: string;
  let browser: Browser;
  const methods: string[] = [];
  const sessions: string[] = [];

  beforeAll(async () => {
    const script = await bundlePage();
    const running = await startGateway({
      middleware: [
        (ctx, next) => {
          methods.push(ctx.method);
          return next();
        },
      ],
      httpHandler: (req, res) => {
        const isScript = req.url === '/page.js';
        res.writeHead(200, {
          'content-type': `${isScript ? 'text/javascript' : 'text/html'}; charset=utf-8`,
        });
        res.end(isScript ? script : html);
        return true;
      },
    });
    gateway = running.gateway;
    httpUrl = running.httpUrl;
    gateway.topic('feed');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    gateway.connected$.subscribe((session) => sessions.push(session.id));
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
  });

  it('renders a call and live messages; StrictMode makes one session and one subscribe', async () => {
    const tab = await browser.newPage();
    const errors: string[] = [];
    tab.on('pageerror', (error) => errors.push(error.message));
    await tab.goto(`${httpUrl}/`);
    await tab.locator('#sum', { hasText: '42' }).waitFor(WAIT);
    await tab.locator('#status', { hasText: 'subscribed' }).waitFor(WAIT);
    expect(await tab.locator('#state').innerText()).toBe('open');

    for (const text of ['one', 'two', 'three', 'four']) {
      await gateway.publish('feed', text);
      await tab.locator('#feed li', { hasText: text }).waitFor(WAIT);
    }
    expect(await items(tab)).toEqual(['two', 'three', 'four']);
    expect({ sessions: sessions.length, methods }).toEqual({
      sessions: 1,
      methods: ['add', 'subscribe'],
    });

    // The page goes: its session closes.
    await tab.close();
    await expect.poll(() => gateway.sessions.size, WAIT).toBe(0);
    expect(errors).toEqual([]);
  });
});

describe.skipIf(missing !== undefined)("the demo's React page in Chromium", () => {
  let server: DemoServer;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    server = new DemoServer(await freePort());
    await server.start();
    browser = await launchChromium();
    page = await browser.newPage();
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${server.httpUrl}/react`);
    await page.locator('#state[data-state="open"]').waitFor(WAIT);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (server) expect(await server.stop()).toBe(0);
  }, 30_000);

  it('shows the ticker, a call that follows its inputs, the chat and the countdown stream', async () => {
    await page.locator('#ticker-status', { hasText: 'subscribed' }).waitFor(WAIT);
    await expect.poll(() => page.locator('#ticker-history li').count(), WAIT).toBeGreaterThan(1);
    expect(await page.locator('#difference').innerText()).toBe('19');
    await page.fill('#minuend', '100');
    await page.locator('#difference', { hasText: '77' }).waitFor(WAIT);

    await page.fill('#chat-text', 'hello from React');
    await page.click('#chat-send');
    await page.locator('#chat-list li', { hasText: 'hello from React' }).waitFor(WAIT);

    await page.locator('#countdown-history', { hasText: '5 4 3 2 1 0' }).waitFor(WAIT);
    await page.locator('#countdown-status', { hasText: 'closed' }).waitFor(WAIT);
    await page.click('#countdown-reset');
    await page.locator('#countdown-status', { hasText: 'subscribed' }).waitFor(WAIT);
    await page.locator('#countdown-history', { hasText: '5 4 3 2 1 0' }).waitFor(WAIT);
  });

  it('drops the connection on request and shows it resuming, then subscribed again', async () => {
    const seen: string[] = [];
    await page.exposeFunction('seenStatus', (state: string) => seen.push(state));
    await page.evaluate(() => {
      const status = document.querySelector('#ticker-status')!;
      new MutationObserver(() =>
        (window as unknown as { seenStatus(s: string): void }).seenStatus(status.textContent),
      ).observe(status, { childList: true, characterData: true, subtree: true });
    });
    await page.click('#drop');
    await page.locator('#last-close', { hasText: '4001' }).waitFor(WAIT);
    await page.locator('#state[data-state="open"]').waitFor(WAIT);
    await expect.poll(() => seen.at(-1), WAIT).toBe('subscribed');
    expect(seen).toContain('resuming');
    expect(errors).toEqual([]);
  });
});
