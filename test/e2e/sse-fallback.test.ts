/**
 * The HTTP streaming fallback in a real browser: Chromium loads a page whose `WebSocket`
 * constructor throws (as where WebSocket is blocked), with the client bundled from src/ for the
 * browser; `fallbackSocket()` falls back to the event stream, and calls, a subscription and a
 * server-to-client call work over it; from a page on another origin too, once the gateway's
 * allowedOrigins has it (CORS, with the page's cookie sent along).
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { startGateway } from '../support/gateway.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] HTTP streaming fallback tests skipped: ${missing}`);

const page = `<!doctype html><script>
window.WebSocket = class BlockedWebSocket {
  constructor() { throw new Error('WebSocket is blocked on this network'); }
};
</script><script type="module">
import { createClient, fallbackSocket } from '/client.js';
window.run = async (gateway = location.host) => {
  const client = createClient({
    url: 'ws://' + gateway + '/rpc',
    WebSocket: fallbackSocket(),
    reconnect: { initialDelayMs: 20, maxDelayMs: 50 },
  });
  client.method('client.name', () => 'chromium');
  const sum = await client.call('add', [20, 22]);
  const user = await client.call('whoami');
  const asked = await client.call('ask');
  const seen = [];
  const subscription = client.subscribe('feed').subscribe((n) => seen.push(n));
  for (let i = 0; i < 100 && !seen.includes(3); i++) {
    await client.call('publish');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  subscription.unsubscribe();
  await client.close();
  return { sum, user, asked, seen: seen.includes(3) };
};
window.ready = true;
</script>`;

describe.skipIf(missing !== undefined)('HTTP streaming fallback in Chromium', () => {
  let gateway: Gateway<{ user: string }>;
  let browser: Browser;
  let httpUrl: string;
  /** Another origin (another port): the same page and client, served apart from the gateway. */
  let pageServer: Server;
  let pageUrl: string;

  beforeAll(async () => {
    const bundle = await build({
      entryPoints: [new URL('../../src/client/index.ts', import.meta.url).pathname],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'chrome110',
      write: false,
    });
    const clientJs = bundle.outputFiles[0]!.text;
    pageServer = createServer((req, res) => {
      const js = req.url === '/client.js';
      res.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
      res.end(js ? clientJs : page);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    const pagePort = (pageServer.address() as { port: number }).port;
    pageUrl = `http://127.0.0.1:${pagePort}`;
    let ownOrigin = '';
    const running = await startGateway<{ user: string }>({
      routes: { events: '/rpc/events' },
      // Its own pages (a browser sends their Origin on a POST too) and the other origin's.
      allowedOrigins: (origin) => origin === ownOrigin || origin === pageUrl,
      // The page's cookie (set on its origin; cookies do not keep apart ports).
      authenticate: ({ cookies }) => ({ user: cookies['user'] ?? 'nobody' }),
      httpHandler: (req, res) => {
        const js = req.url === '/client.js';
        res.writeHead(200, { 'content-type': js ? 'text/javascript' : 'text/html' });
        res.end(js ? clientJs : page);
        return true;
      },
    });
    gateway = running.gateway;
    httpUrl = running.httpUrl;
    ownOrigin = httpUrl;
    gateway.topic('feed');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
    gateway.method('publish', async () => {
      await gateway.publish('feed', 3);
      return true;
    });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
    await new Promise((resolve) => pageServer?.close(resolve));
  });

  it('falls back to the event stream and works: calls, a server-to-client call, a subscription', async () => {
    const tab = await browser.newPage();
    await tab.goto(`${httpUrl}/`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
    const kinds: string[] = [];
    gateway.connected$.subscribe((session) => kinds.push(session.transport.kind));
    const result = await tab.evaluate(() =>
      (window as unknown as { run(): Promise<unknown> }).run(),
    );
    expect(result).toEqual({ sum: 42, user: 'nobody', asked: 'chromium', seen: true });
    expect(kinds).toEqual(['sse']);
  }, 30_000);

  it('works from a page on another origin that allowedOrigins has, its cookie sent along', async () => {
    // A context of its own: its cookie stays out of the other test's requests.
    const context = await browser.newContext();
    const tab = await context.newPage();
    await tab.goto(`${pageUrl}/`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
    await tab.evaluate(() => (document.cookie = 'user=ann'));
    const kinds: string[] = [];
    gateway.connected$.subscribe((session) => kinds.push(session.transport.kind));
    const gatewayHost = new URL(httpUrl).host;
    const result = await tab.evaluate(
      (host) => (window as unknown as { run(host: string): Promise<unknown> }).run(host),
      gatewayHost,
    );
    expect(result).toEqual({ sum: 42, user: 'ann', asked: 'chromium', seen: true });
    expect(kinds).toEqual(['sse']);
    await context.close();
  }, 30_000);
});
