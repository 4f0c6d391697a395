/**
 * A page on another origin reads the Retry-After of the gateway's refusals: a POST to the RPC
 * route refused 429 (the address's byte budget), and an event stream's resume refused 429 (the
 * session's resume rate). Retry-After is not a header CORS lets a page read unless the response
 * exposes it; without it the page's client sees none, and waits its own fallback (or takes a 503
 * as final) instead of what the gateway asked.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { startGateway } from '../support/gateway.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] cross-origin Retry-After tests skipped: ${missing}`);

const page = `<!doctype html><script>
window.postUntilRefused = async (gateway) => {
  for (let i = 0; i < 10; i++) {
    const res = await fetch('http://' + gateway + '/rpc', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'add', params: [1, 2] }),
    });
    await res.text();
    if (res.status !== 200) return { status: res.status, retryAfter: res.headers.get('retry-after') };
  }
  return { status: 'never refused' };
};
window.resumeUntilRefused = async (gateway) => {
  const url = 'http://' + gateway + '/rpc/events';
  const opened = await fetch(url);
  const reader = opened.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('\\n\\n')) text += decoder.decode((await reader.read()).value, { stream: true });
  await reader.cancel();
  const line = text.split('\\n').find((l) => l.startsWith('data:'));
  const session = JSON.parse(line.slice(5));
  for (let i = 0; i < 40; i++) {
    const abort = new AbortController();
    const res = await fetch(url, {
      headers: {
        'x-wsrpc-session': session.session,
        'x-wsrpc-secret': session.secret,
        'last-event-id': String(session.lastEventId),
      },
      signal: abort.signal,
    });
    if (res.status !== 200) return { status: res.status, retryAfter: res.headers.get('retry-after') };
    abort.abort();
  }
  return { status: 'never refused' };
};
window.post = async (gateway, method) => {
  try {
    const res = await fetch('http://' + gateway + '/rpc', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() };
  } catch (err) {
    return { failed: String(err) };
  }
};
window.ready = true;
</script>`;

describe.skipIf(missing !== undefined)('Retry-After read by a page on another origin', () => {
  let gateway: Gateway;
  let gatewayHost: string;
  let browser: Browser;
  let pageServer: Server;
  let tab: Page;

  beforeAll(async () => {
    pageServer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(page);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    const pageUrl = `http://127.0.0.1:${(pageServer.address() as { port: number }).port}`;
    const running = await startGateway({
      routes: { events: '/rpc/events' },
      allowedOrigins: [pageUrl],
      // Two POSTs' worth of bytes per address, refilled a byte a second: the third is refused.
      limits: { maxMessageBytes: 65_536, messageCostBytes: 65_536, bytesPerSecondPerIp: 1 },
    });
    gateway = running.gateway;
    gatewayHost = new URL(running.httpUrl).host;
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    browser = await launchChromium();
    tab = await browser.newPage();
    await tab.goto(`${pageUrl}/`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
    await new Promise((resolve) => pageServer?.close(resolve));
  });

  it('of a POST refused 429', async () => {
    const refused = await tab.evaluate(
      (host) =>
        (
          window as unknown as { postUntilRefused(host: string): Promise<unknown> }
        ).postUntilRefused(host),
      gatewayHost,
    );
    expect(refused).toEqual({ status: 429, retryAfter: expect.stringMatching(/^[1-9]\d*$/) });
  }, 30_000);

  it("of an event stream's resume refused 429", async () => {
    const refused = await tab.evaluate(
      (host) =>
        (
          window as unknown as { resumeUntilRefused(host: string): Promise<unknown> }
        ).resumeUntilRefused(host),
      gatewayHost,
    );
    expect(refused).toEqual({ status: 429, retryAfter: expect.stringMatching(/^[1-9]\d*$/) });
  }, 30_000);

  it('of a POST refused 503 while the gateway shuts down (before it reads the request)', async () => {
    const draining = await startGateway({ allowedOrigins: [new URL(tab.url()).origin] });
    const host = new URL(draining.httpUrl).host;
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    draining.gateway.method('held', async () => {
      started();
      await new Promise<void>((resolve) => (release = resolve));
      return 'done';
    });
    type Post = (host: string, method: string) => Promise<unknown>;
    const held = tab.evaluate(
      ([at, method]) => (window as unknown as { post: Post }).post(at, method),
      [host, 'held'] as const,
    );
    await running;
    // Closing waits for the call in flight: a POST meanwhile is refused, to be tried elsewhere.
    const closed = draining.gateway.close({ timeoutMs: 10_000 });
    const refused = await tab.evaluate(
      ([at, method]) => (window as unknown as { post: Post }).post(at, method),
      [host, 'held'] as const,
    );
    release();
    await closed;
    expect(refused).toEqual({ status: 503, retryAfter: '1', body: 'Server shutting down\n' });
    expect(await held).toMatchObject({ status: 200 });
  }, 30_000);
});
