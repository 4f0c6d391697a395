/**
 * The browser's network and visibility events in Chromium: a client waiting out a long backoff
 * dials at once when the network comes back (`online`, from the context going offline and back)
 * or the page becomes visible again; an open connection whose server went silent is probed when
 * the network goes or comes back, and left (4000) within the heartbeat's timeout rather than at
 * the next heartbeat. Each backoff and heartbeat interval here is ten minutes: without the events
 * nothing would happen within the test's time.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { ensureBuilt, root } from '../support/demo-process.js';
import { startGateway } from '../support/gateway.js';
import { TcpRelay } from '../support/tcp-relay.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] network event tests skipped: ${missing}`);

const TEN_MINUTES = 600_000;

const page = `<!doctype html><script type="module">
import { createClient } from '/client.js';
window.start = async (port) => {
  const client = (window.client = createClient({
    url: 'ws://127.0.0.1:' + port + '/rpc',
    reconnect: { initialDelayMs: ${TEN_MINUTES}, maxDelayMs: ${TEN_MINUTES}, jitter: 0 },
    heartbeat: { intervalMs: ${TEN_MINUTES}, timeoutMs: 300 },
  }));
  window.states = [];
  window.disconnects = [];
  client.state$.subscribe((state) => window.states.push(state));
  client.disconnects$.subscribe((e) => window.disconnects.push({ code: e.code, reason: e.reason }));
  await client.opened();
  return client.call('echo', ['first']);
};
window.ready = true;
</script>`;

describe.skipIf(missing !== undefined)('network and visibility events in Chromium', () => {
  let gateway: Gateway;
  let port: number;
  let httpUrl: string;
  let browser: Browser;
  let context: BrowserContext;
  let tab: Page;
  let relay: TcpRelay | undefined;

  beforeAll(async () => {
    await ensureBuilt();
    const clientJs = readFileSync(join(root, 'dist/browser/client.js'));
    const running = await startGateway({
      httpHandler: (req, res) => {
        const js = req.url === '/client.js';
        res.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
        res.end(js ? clientJs : page);
        return true;
      },
    });
    running.gateway.method('echo', (params) => params);
    ({ gateway, port, httpUrl } = running);
    browser = await launchChromium();
  }, 120_000);

  afterEach(async () => {
    await tab?.evaluate(() =>
      (window as unknown as { client: { close(): Promise<void> } }).client?.close(),
    );
    await context?.close();
    relay?.release();
    await relay?.cut();
    relay = undefined;
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
  });

  async function openPage(clientPort: number): Promise<void> {
    context = await browser.newContext();
    tab = await context.newPage();
    await tab.goto(`${httpUrl}/`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
    const first = await tab.evaluate(
      (p) => (window as unknown as { start(p: number): Promise<unknown> }).start(p),
      clientPort,
    );
    expect(first).toEqual(['first']);
  }

  /** Closes every session on the gateway: the page's client starts its ten-minute backoff. */
  async function dropSessions(): Promise<void> {
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await tab.waitForFunction(
      () => (window as unknown as { client: { state: string } }).client.state === 'reconnecting',
    );
  }

  const callEcho = (value: string) =>
    tab.evaluate(
      (v) =>
        (
          window as unknown as { client: { call(m: string, p: unknown): Promise<unknown> } }
        ).client.call('echo', [v]),
      value,
    );

  it('the network coming back dials at once, not after the backoff', async () => {
    await openPage(port);
    await dropSessions();
    await context.setOffline(true);
    await context.setOffline(false);
    await tab.waitForFunction(
      () => (window as unknown as { client: { state: string } }).client.state === 'open',
    );
    expect(await callEcho('after online')).toEqual(['after online']);
    const states = await tab.evaluate(() => (window as unknown as { states: string[] }).states);
    expect(states).toEqual(['connecting', 'open', 'reconnecting', 'open']);
  });

  it('the page becoming visible dials at once, not after the backoff', async () => {
    await openPage(port);
    await dropSessions();
    const visibility = await tab.evaluate(() => {
      document.dispatchEvent(new Event('visibilitychange'));
      return document.visibilityState;
    });
    expect(visibility).toBe('visible');
    await tab.waitForFunction(
      () => (window as unknown as { client: { state: string } }).client.state === 'open',
    );
    expect(await callEcho('after visible')).toEqual(['after visible']);
  });

  it('an open connection to a silent server is probed when the network goes, and left within the timeout', async () => {
    relay = new TcpRelay(port);
    const relayPort = await relay.start();
    await openPage(relayPort);
    relay.hold(); // the server hears nothing more from this client: its rpc.ping goes unanswered
    await context.setOffline(true);
    await tab.waitForFunction(
      () => (window as unknown as { disconnects: unknown[] }).disconnects.length > 0,
    );
    const disconnects = await tab.evaluate(
      () => (window as unknown as { disconnects: unknown[] }).disconnects,
    );
    expect(disconnects).toEqual([{ code: 4000, reason: 'heartbeat timeout' }]);
  });
});
