/**
 * One connection for every tab, in Chromium: three pages of one browser context use
 * createSharedClient with the SharedWorker script (both bundled from src/ as the build bundles
 * them). The gateway counts one WebSocket session for the three; two tabs subscribed to one
 * topic are one subscription on the gateway and both get its messages; a tab's call is
 * answered; a server-to-client call is answered by the first tab that registered it, then by
 * the next once that tab closes; closing tabs releases their subscription when the last one on
 * the topic goes, and the last tab ends the session; a tab's batch and history go through the
 * worker too. Pages without SharedWorker, or whose worker script is missing, fall back to a
 * connection of their own behind the same API.
 */
import { build } from 'esbuild';
import type { BuildOptions } from 'esbuild';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { startGateway } from '../support/gateway.js';
import { waitFor, within } from '../support/waiting.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] shared worker tests skipped: ${missing}`);

const page = `<!doctype html><script type="module">
import { createSharedClient } from '/shared.js';
const query = new URLSearchParams(location.search);
if (query.has('no-shared-worker')) delete window.SharedWorker;
const client = createSharedClient({
  url: '/rpc',
  workerUrl: query.get('worker') ?? '/shared-worker.js',
  reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
});
const got = [];
// What the test does in the page, by name.
window.act = {
  opened: () => client.opened(),
  shared: () => client.shared,
  call: ([method, params]) => client.call(method, params),
  batch: (entries) =>
    client.batch(entries).then((results) =>
      results.map((r) => (r.status === 'fulfilled' ? r.value : { code: r.reason.code })),
    ),
  history: (topic) => client.history(topic),
  subscribeNews: () => void client.subscribe('news').subscribe((m) => got.push(m)),
  got: () => got,
  statusOfNews: (wanted) =>
    new Promise((resolve) => {
      const watching = client.subscriptionStatus$('news').subscribe((s) => {
        if (s.state !== wanted) return;
        resolve(s.state);
        queueMicrotask(() => watching.unsubscribe());
      });
    }),
  answerAs: (name) => void client.method('client.name', (_params, ctx) => name + ' ' + ctx.method),
};
window.ready = true;
</script>`;

/** Bundled from src/ for Chromium, as scripts/bundle-client.mjs bundles it. */
async function bundle(contents: string, options: BuildOptions = {}): Promise<string> {
  const out = await build({
    stdin: { contents, resolveDir: new URL('../../', import.meta.url).pathname, loader: 'ts' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome110',
    write: false,
    logLevel: 'error',
    ...options,
  });
  return out.outputFiles![0]!.text;
}

describe.skipIf(missing !== undefined)('createSharedClient in Chromium', () => {
  let gateway: Gateway;
  let browser: Browser;
  let httpUrl: string;
  /** WebSocket sessions the gateway has opened. */
  let opened = 0;

  beforeAll(async () => {
    const scripts = new Map<string, string>([
      ['/shared.js', await bundle("export * from './src/client/shared/index.ts';")],
      [
        '/shared-worker.js',
        await bundle(
          "import { shareClient } from './src/client/shared/index.ts';\nshareClient();",
          { format: 'iife' },
        ),
      ],
    ]);
    const running = await startGateway({
      httpHandler: (req, res) => {
        const path = (req.url ?? '/').split('?')[0]!;
        const script = scripts.get(path);
        if (!script && path !== '/') {
          res.writeHead(404).end();
          return true;
        }
        res.writeHead(200, {
          'content-type': `${script ? 'text/javascript' : 'text/html'}; charset=utf-8`,
        });
        res.end(script ?? page);
        return true;
      },
    });
    gateway = running.gateway;
    httpUrl = running.httpUrl;
    gateway.topic('news');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    gateway.connected$.subscribe(() => opened++);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
  });

  async function openTab(context: BrowserContext, query = ''): Promise<Page> {
    const tab = await context.newPage();
    await tab.goto(`${httpUrl}/${query}`);
    await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
    await act(tab, 'opened');
    return tab;
  }

  /**
   * Run `name` of the page's `act` with `arg`; a step that does not end within 20 s fails
   * naming itself and the page (rather than the whole test's timeout naming nothing).
   */
  const act = (tab: Page, name: string, arg?: unknown): Promise<unknown> =>
    within(
      tab.evaluate(
        ([n, a]) =>
          (window as unknown as { act: Record<string, (a: unknown) => unknown> }).act[n]!(a),
        [name, arg] as const,
      ),
      `act ${name}(${JSON.stringify(arg) ?? ''}) in ${tab.url()}`,
      20_000,
    );
  const gotIn = async (tab: Page, count: number): Promise<unknown> => {
    await waitFor(async () => ((await act(tab, 'got')) as unknown[]).length === count, 'messages');
    return act(tab, 'got');
  };

  const newsSubscriptions = (): number => gateway.pubsub.topics()['news'] ?? 0;
  const session = () => {
    expect(gateway.sessions.size).toBe(1);
    return [...gateway.sessions.values()][0]!;
  };

  it('three tabs share one WebSocket, one subscription per topic, and hand calls in both directions', async () => {
    const context = await browser.newContext();
    const before = opened;
    const one = await openTab(context);
    const two = await openTab(context);
    const three = await openTab(context);
    expect(gateway.sessions.size).toBe(1);
    expect(opened - before).toBe(1);
    expect(await act(three, 'shared')).toBe(true);

    await act(one, 'subscribeNews');
    await act(two, 'subscribeNews');
    await act(one, 'statusOfNews', 'subscribed');
    await act(two, 'statusOfNews', 'subscribed');
    expect(newsSubscriptions()).toBe(1);
    await gateway.publish('news', { text: 'é ✓', n: 1 });
    for (const tab of [one, two]) expect(await gotIn(tab, 1)).toEqual([{ text: 'é ✓', n: 1 }]);

    expect(await act(three, 'call', ['add', [20, 22]])).toBe(42);
    // Batch and history go through the worker's client too.
    expect(
      await act(three, 'batch', [
        { method: 'add', params: [1, 2] },
        { method: 'nope' },
        { method: 'add', params: [3, 4] },
      ]),
    ).toEqual([3, { code: -32601 }, 7]);
    expect(await act(three, 'history', 'news')).toMatchObject({
      messages: [{ data: { text: 'é ✓', n: 1 } }],
    });
    expect(gateway.sessions.size).toBe(1);

    await act(two, 'answerAs', 'two');
    const answers = () =>
      session()
        .call('client.name')
        .then(
          () => true,
          () => false,
        );
    await waitFor(answers, "tab two's handler to reach the worker");
    await act(three, 'answerAs', 'three');
    expect(await session().call('client.name')).toBe('two client.name');

    // Closing tabs: the topic is held while one tab observes it; the handler moves on.
    await one.close({ runBeforeUnload: true });
    await gateway.publish('news', { n: 2 });
    await gotIn(two, 2);
    expect(newsSubscriptions()).toBe(1);
    await two.close({ runBeforeUnload: true });
    await waitFor(() => newsSubscriptions() === 0, "the last subscribed tab's subscription to end");
    expect(await session().call('client.name')).toBe('three client.name');
    expect(gateway.sessions.size).toBe(1);
    expect(opened - before).toBe(1);

    await three.close({ runBeforeUnload: true });
    await waitFor(() => gateway.sessions.size === 0, 'the last tab to end the session');
    await context.close();
  }, 60_000);

  it('without SharedWorker, or with its script missing, each tab has a connection of its own', async () => {
    const context = await browser.newContext();
    const before = opened;
    const plain = await openTab(context, '?no-shared-worker');
    const broken = await openTab(context, '?worker=/missing-worker.js');
    expect(await act(plain, 'shared')).toBe(false);
    expect(await act(broken, 'shared')).toBe(false);
    expect(gateway.sessions.size).toBe(2);
    expect(opened - before).toBe(2);
    for (const tab of [plain, broken]) {
      expect(await act(tab, 'call', ['add', [1, 2]])).toBe(3);
      await act(tab, 'subscribeNews');
      await act(tab, 'statusOfNews', 'subscribed');
    }
    expect(newsSubscriptions()).toBe(2);
    await gateway.publish('news', 'each');
    for (const tab of [plain, broken]) expect(await gotIn(tab, 1)).toEqual(['each']);
    await context.close();
    await waitFor(() => gateway.sessions.size === 0, 'the tabs to end their sessions');
  }, 60_000);
});
