/**
 * The demo page in a real browser: Debian's Chromium driven by playwright-core, against the
 * demo server as `npm start` runs it. Two pages (two tabs' worth of sessions) share one server.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { specExamples } from '../../demo/web/presets.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { ensureBuilt, root } from '../support/demo-process.js';
import { DemoServer } from '../support/demo-server.js';
import { freePort } from '../support/network.js';
import { essence, expectedReplies } from '../support/spec-expectations.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] demo page tests skipped: ${missing}`);

/** Where the test run writes the picture of the page (named in the README). */
export const SCREENSHOT = join(root, 'test-results', 'demo-page.png');

const WAIT = { timeout: 15_000 };
// Poll on a timer: a page in a background tab gets no animation frames to poll on.
const POLL = { timeout: 15_000, polling: 50 };

const text = (page: Page, selector: string) => page.locator(selector).innerText();
const count = async (page: Page, selector: string) => Number(await text(page, selector));

/** Wait until the number in `selector` is at least `atLeast`. */
async function numberReaches(page: Page, selector: string, atLeast: number): Promise<void> {
  await page.waitForFunction(
    ([sel, n]) => Number(document.querySelector(sel as string)?.textContent) >= (n as number),
    [selector, atLeast] as const,
    POLL,
  );
}

async function chatSays(page: Page, message: string): Promise<void> {
  await page.locator('#chat-list li .text', { hasText: message }).first().waitFor(WAIT);
}

/** Send console preset `index`; resolves with the raw reply text, or 'no reply'. */
async function sendPreset(page: Page, index: number): Promise<string> {
  await page.selectOption('#console-preset', String(index));
  const before = await page.locator('#console-output .entry').count();
  await page.click('#console-send');
  const outcome = await page.waitForFunction(
    (n) => {
      const entries = [...document.querySelectorAll('#console-output .entry')].slice(n);
      const done = entries.find(
        (e) =>
          e.classList.contains('reply') ||
          (e.classList.contains('note') && e.textContent.includes('no reply')),
      );
      if (!done) return false;
      return done.classList.contains('reply') ? done.textContent.slice(2) : 'no reply';
    },
    before,
    POLL,
  );
  return (await outcome.jsonValue()) as string;
}

describe.skipIf(missing !== undefined)('the demo page in Chromium', () => {
  let server: DemoServer;
  let browser: Browser;
  let a: Page;
  let b: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    server = new DemoServer(await freePort());
    await server.start();
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    [a, b] = [await context.newPage(), await context.newPage()];
    for (const page of [a, b]) {
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(`${server.httpUrl}/`);
      await page.locator('#state[data-state="open"]').waitFor(WAIT);
    }
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (server) {
      const code = await server.stop();
      expect(code).toBe(0);
    }
  }, 30_000);

  it('loads the browser build of the client from the same port as the gateway', async () => {
    const client = await fetch(`${server.httpUrl}/client.js`);
    expect(client.status).toBe(200);
    expect(client.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(await client.text()).toContain('rpc.ping');
    expect(await a.locator('script[type=module]').getAttribute('src')).toBe('/app.js');
    expect((await fetch(`${server.httpUrl}/nope`)).status).toBe(404);
  });

  it('the ticker updates from the topic subscription', async () => {
    await numberReaches(a, '#ticker-count', 1);
    const first = await text(a, '#ticker-seq');
    await numberReaches(a, '#ticker-count', (await count(a, '#ticker-count')) + 2);
    expect(await text(a, '#ticker-seq')).not.toBe(first);
    expect(await text(a, '#ticker-price')).toMatch(/^\d+\.\d\d$/);
    expect(await a.locator('#chart-line').getAttribute('points')).toMatch(/\d+(\.\d+)?,\d/);
  });

  it('two pages chat with each other', async () => {
    await a.fill('#chat-input', 'hello from A');
    await a.click('#chat-send');
    await chatSays(b, 'hello from A');
    await chatSays(a, 'hello from A');
    await b.fill('#chat-input', 'and hello back from B');
    await b.press('#chat-input', 'Enter');
    await chatSays(a, 'and hello back from B');
    const fromOnA = a.locator('#chat-list li', { hasText: 'hello back' }).locator('.from');
    expect(await fromOnA.innerText()).toBe(await b.inputValue('#chat-name'));
  });

  it('the server calls the page and gets the answer the user clicked', async () => {
    await a.fill('#ask-question', 'Ready for the demo?');
    await a.click('#ask');
    await a.locator('#confirm-dialog:not([hidden])').waitFor(WAIT);
    expect(await text(a, '#confirm-question')).toBe('Ready for the demo?');
    await a.click('#confirm-yes');
    await a.locator('#ask-result.good').waitFor(WAIT);
    expect(await text(a, '#ask-result')).toContain('got back: "yes"');
    expect(await a.locator('#confirm-dialog').isHidden()).toBe(true);

    await b.click('#ask');
    await b.locator('#confirm-dialog:not([hidden])').waitFor(WAIT);
    await b.click('#confirm-no');
    await b.locator('#ask-result.good').waitFor(WAIT);
    expect(await text(b, '#ask-result')).toContain('got back: "no"');
  });

  it("the console answers every example of the specification's section 7", async () => {
    expect(specExamples.map((e) => e.label).sort()).toEqual(Object.keys(expectedReplies).sort());
    // A background tab gets throttled animation frames, which clicks wait on.
    await a.bringToFront();
    const got: Record<string, unknown> = {};
    for (const [i, example] of specExamples.entries()) {
      const reply = await sendPreset(a, i);
      got[example.label] = reply === 'no reply' ? reply : essence(JSON.parse(reply));
    }
    expect(got).toEqual(expectedReplies);
    // notify_hello inside the batch makes the server push "hello" to the console's socket.
    expect(await a.locator('#console-output .push').first().innerText()).toContain('"hello"');
  }, 60_000);

  it('a dropped connection comes back by itself and the ticker resumes with nothing lost', async () => {
    await numberReaches(a, '#ticker-count', 1);
    await a.click('#drop');
    await numberReaches(a, '#reconnects', 1);
    await a.locator('#state[data-state="open"]').waitFor(WAIT);
    await a.locator('#resume-info.good').waitFor(WAIT);
    expect(await text(a, '#resume-info')).toMatch(
      /^Resumed after #\d+, next came #\d+: .*lost: 0\.$/,
    );
    const [after, next] = (await text(a, '#resume-info'))
      .match(/#(\d+)/g)!
      .map((s) => Number(s.slice(1)));
    expect(next).toBe(after! + 1);
    expect(await text(a, '#ticker-lost')).toBe('0');
    // The other page was not touched.
    expect(await text(b, '#reconnects')).toBe('0');

    mkdirSync(join(root, 'test-results'), { recursive: true });
    await a.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(10_000);
  });

  it('after a server restart both pages reconnect and resubscribe by themselves', async () => {
    const reconnectsA = await count(a, '#reconnects');
    const reconnectsB = await count(b, '#reconnects');
    expect(await server.stop()).toBe(0);
    for (const page of [a, b])
      await page.locator('#state[data-state="reconnecting"]').waitFor(WAIT);
    await server.start();
    await numberReaches(a, '#reconnects', reconnectsA + 1);
    await numberReaches(b, '#reconnects', reconnectsB + 1);
    for (const page of [a, b]) await page.locator('#state[data-state="open"]').waitFor(WAIT);

    // Resubscribed: the ticker moves again and the chat carries messages both ways.
    const ticks = await count(b, '#ticker-count');
    await numberReaches(b, '#ticker-count', ticks + 2);
    await b.fill('#chat-input', 'still here after the restart');
    await b.click('#chat-send');
    await chatSays(a, 'still here after the restart');
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
