/**
 * The demo chat in Chromium: who is in the room (presence on `chat`), and a message shown once
 * on its sender's page (at once, locally; the server publishes it to everyone but the sender)
 * and once on the other page.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserMissing, launchChromium } from '../support/browser.js';
import { ensureBuilt } from '../support/demo-process.js';
import { DemoServer } from '../support/demo-server.js';
import { freePort } from '../support/network.js';
import { sleep } from '../support/promises.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] demo chat tests skipped: ${missing}`);

const WAIT = { timeout: 15_000 };
const POLL = { timeout: 15_000, polling: 50 };

/** Wait until the page's room list shows `n` members, itself among them as "you". */
async function roomHas(page: Page, n: number): Promise<void> {
  const shown = async () =>
    `count ${await page.locator('#chat-count').innerText()}, list [${(
      await page.locator('#chat-room li').allInnerTexts()
    ).join(', ')}]`;
  await page
    .waitForFunction(
      (expected) => {
        const items = [...document.querySelectorAll('#chat-room li')];
        return (
          document.querySelector('#chat-count')?.textContent === String(expected) &&
          items.length === expected &&
          items.filter((item) => item.textContent === 'you').length === 1
        );
      },
      n,
      POLL,
    )
    .catch(async (err: unknown) => {
      throw new Error(`the room never showed ${n} members with "you": ${await shown()}`, {
        cause: err,
      });
    });
}

const times = (page: Page, message: string) =>
  page.locator('#chat-list li .text', { hasText: message }).count();

describe.skipIf(missing !== undefined)('the demo chat in Chromium', () => {
  let server: DemoServer;
  let browser: Browser;
  let context: BrowserContext;
  let a: Page;
  let b: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    server = new DemoServer(await freePort());
    await server.start();
    browser = await launchChromium();
    context = await browser.newContext();
    [a, b] = [await context.newPage(), await context.newPage()];
    for (const page of [a, b]) {
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(`${server.httpUrl}/`);
      await page.locator('#state[data-state="open"]').waitFor(WAIT);
    }
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (server) expect(await server.stop()).toBe(0);
  }, 30_000);

  it('two pages see each other in the room', async () => {
    await roomHas(a, 2);
    await roomHas(b, 2);
    const others = await a.locator('#chat-room li:not(.you)').innerText();
    expect(others).toMatch(/^guest \w{4}$/);
  });

  it("a page's message appears once on its own page and once on the other", async () => {
    await a.fill('#chat-input', 'only once, please');
    await a.click('#chat-send');
    // On the sender's page at once, before any round trip.
    expect(await times(a, 'only once, please')).toBe(1);
    await b.locator('#chat-list li .text', { hasText: 'only once, please' }).waitFor(WAIT);
    // Long enough for an echo from the topic to have arrived, had there been one.
    await sleep(500);
    expect(await times(a, 'only once, please')).toBe(1);
    expect(await times(b, 'only once, please')).toBe(1);
    expect(await a.locator('#chat-list li.mine .text').last().innerText()).toBe(
      'only once, please',
    );
    expect(
      await b.locator('#chat-list li', { hasText: 'only once, please' }).getAttribute('class'),
    ).not.toBe('mine');
  });

  it('a page that leaves leaves the room', async () => {
    await b.close();
    await roomHas(a, 1);
    expect(pageErrors).toEqual([]);
  });
});
