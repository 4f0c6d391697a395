/**
 * The demo page's identity in Chromium: a token that lives 3 s, refreshed by the server's
 * rpc.token call on the live connection, again and again, without the connection dropping.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing, launchChromium } from '../support/browser.js';
import { ensureBuilt } from '../support/demo-process.js';
import { DemoServer } from '../support/demo-server.js';
import { freePort } from '../support/network.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] demo identity tests skipped: ${missing}`);

const POLL = { timeout: 20_000, polling: 100 };

const text = (page: Page, selector: string) => page.locator(selector).innerText();

describe.skipIf(missing !== undefined)('the demo page keeps its identity alive', () => {
  let server: DemoServer;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    server = new DemoServer(await freePort(), { DEMO_TOKEN_TTL_MS: '3000' });
    await server.start();
    browser = await launchChromium();
    page = await browser.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${server.httpUrl}/`);
    await page.locator('#state[data-state="open"]').waitFor({ timeout: 15_000 });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (server) expect(await server.stop()).toBe(0);
  }, 30_000);

  it('the token is replaced on the same session, past several expiries, with no reconnect', async () => {
    await page.waitForFunction(
      () => document.querySelector('#identity-token')?.textContent?.startsWith('#'),
      undefined,
      POLL,
    );
    const first = Number((await text(page, '#identity-token')).slice(1));
    // Three refreshes of a 3 s token: the first token has long expired by then.
    await page.waitForFunction(
      () => Number(document.querySelector('#identity-refreshes')?.textContent) >= 3,
      undefined,
      POLL,
    );
    const now = Number((await text(page, '#identity-token')).slice(1));
    expect(now).toBeGreaterThan(first);
    expect(await text(page, '#reconnects')).toBe('0');
    expect(await page.locator('#state').getAttribute('data-state')).toBe('open');
    const log = await text(page, '#log');
    expect(log).toContain('took over on the same connection');
    expect(log).not.toContain('connection lost');
    expect(pageErrors).toEqual([]);
  }, 30_000);

  it('"Refresh now" presents a fresh token at once', async () => {
    const before = Number(await text(page, '#identity-refreshes'));
    await page.click('#identity-refresh');
    await page
      .locator('#log li', { hasText: 'refreshed now' })
      .first()
      .waitFor({ timeout: 10_000 });
    await page.waitForFunction(
      (n) => Number(document.querySelector('#identity-refreshes')?.textContent) > n,
      before,
      POLL,
    );
    expect(await text(page, '#reconnects')).toBe('0');
  });

  it('connections without a token stay anonymous and do not expire', async () => {
    const reply = await fetch(`${server.httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'demo.whoami' }),
    });
    const { result } = (await reply.json()) as { result: { anonymous?: boolean } };
    expect(result.anonymous).toBe(true);
  });
});
