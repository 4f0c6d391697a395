/**
 * In-band authentication in a real browser: Chromium loads the bundled client
 * (dist/browser/client.js) from a gateway with `identity.inBand`, whose upgrade cannot carry a
 * header; the page's client authenticates with getToken, and a refused token reaches the page as
 * an AuthenticationError and on disconnects$ with the -32010 reason.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { ensureBuilt, root } from '../support/demo-process.js';
import { startGateway } from '../support/gateway.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] in-band auth tests skipped: ${missing}`);

const page = `<!doctype html><script type="module">
import { AuthenticationError, createClient } from '/client.js';
window.run = async (token) => {
  const client = createClient({
    url: 'ws://' + location.host + '/rpc',
    getToken: () => Promise.resolve(token),
    reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
  });
  const events = [];
  client.disconnects$.subscribe((e) =>
    events.push({ willRetry: e.willRetry, error: e.error?.name, code: e.error?.code, reason: e.error?.reason }),
  );
  try {
    const who = await client.call('whoami');
    await client.close();
    return { who, events };
  } catch (err) {
    const { name, code, reason, message } = err;
    return { error: { name, code, reason, message, isAuth: err instanceof AuthenticationError }, events, state: client.state };
  }
};
window.ready = true;
</script>`;

describe.skipIf(missing !== undefined)('in-band authentication in Chromium', () => {
  let gateway: Gateway<{ user: string }>;
  let httpUrl: string;
  let browser: Browser;
  let tab: Page;

  beforeAll(async () => {
    await ensureBuilt();
    const clientJs = readFileSync(join(root, 'dist/browser/client.js'));
    const running = await startGateway<{ user: string }>({
      identity: { inBand: true },
      authenticate: ({ token }) => {
        if (token === 'alice-token') return { user: 'alice' };
        throw new UpgradeRejection(401, 'unknown token');
      },
      httpHandler: (req, res) => {
        const js = req.url === '/client.js';
        res.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
        res.end(js ? clientJs : page);
        return true;
      },
    });
    running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    gateway = running.gateway;
    httpUrl = running.httpUrl;
    browser = await launchChromium();
    tab = await browser.newPage();
    await tab.goto(`${httpUrl}/`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
  });

  const run = (token: string) =>
    tab.evaluate((t) => (window as unknown as { run(t: string): Promise<unknown> }).run(t), token);

  it('authenticates with the token provider as the first message', async () => {
    expect(await run('alice-token')).toEqual({ who: 'alice', events: [] });
  });

  it('a refused token is an AuthenticationError on the page and on disconnects$', async () => {
    const outcome = await run('stolen');
    const refusal = { name: 'AuthenticationError', code: -32010, reason: 'invalid' };
    expect(outcome).toEqual({
      error: {
        ...refusal,
        message: 'Authentication refused: unknown token (invalid)',
        isAuth: true,
      },
      state: 'closed',
      events: [
        { willRetry: false, error: refusal.name, code: refusal.code, reason: refusal.reason },
      ],
    });
  });
});
