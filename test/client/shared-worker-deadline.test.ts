/**
 * A SharedWorker that never answers its tabs: a `workerUrl` a host answers with the app's
 * index.html (Vite, SPA hosting) makes a worker that fails, and only the tab that started it hears
 * of it (its `error` event); a tab attaching to it later hears nothing at all. Each tab gives the
 * worker `connectTimeoutMs` to answer, then takes the per-tab fallback (or closes, with 'throw'),
 * says so through its logger (the console without one), and what it posted meanwhile goes
 * through the fallback, once: a worker that answers after all runs none of it.
 */
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConnectionClosedError } from '../../src/client/index.js';
import { createSharedClient } from '../../src/client/shared/index.js';
import type { SharedClientOptions, SharedRpcClient } from '../../src/client/shared/index.js';
import type { Logger } from '../../src/peer/logger.js';
import { silentLogger } from '../../src/peer/logger.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { settle, waitFor } from '../support/waiting.js';
import { rejectionOf, sleep } from '../support/promises.js';

const res = new Resources();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await res.cleanup();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

const workerUrl = 'http://127.0.0.1/assets/shared-worker.js';

/**
 * Stands in for the browser's SharedWorker: one worker per script and name, whose script has
 * not run (yet). Each tab gets its own channel; `start` serves them all with `serve` from then on,
 * as a worker whose script loads late would; `fail` fires `error` in the tab that made it first.
 */
function fakeSharedWorkers() {
  const channels: MessageChannel[] = [];
  const errorListeners: (() => void)[] = [];
  let serve: ((port: MessagePort) => void) | undefined;
  class FakeSharedWorker {
    readonly port: MessagePort;
    constructor(
      readonly url: string,
      readonly options: { name?: string },
    ) {
      const channel = new MessageChannel();
      channels.push(channel);
      this.port = channel.port1;
      if (serve) serve(channel.port2);
    }
    addEventListener(type: string, listener: () => void): void {
      // The browser tells only the tab whose SharedWorker started the failing script.
      if (type === 'error' && channels.length === 1) errorListeners.push(listener);
    }
  }
  vi.stubGlobal('SharedWorker', FakeSharedWorker);
  return {
    fail: () => errorListeners.forEach((listener) => listener()),
    start: (serveWith: (port: MessagePort) => void) => {
      serve = serveWith;
      for (const channel of channels) serveWith(channel.port2);
    },
  };
}

/** A logger that keeps its warnings. */
function warnings() {
  const warned: { obj: unknown; msg: string | undefined }[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (obj: unknown, msg?: string) => void warned.push({ obj, msg }),
    child: () => logger,
  };
  return { logger, warned };
}

/** A gateway that counts the calls of `count` it runs. */
async function countingGateway() {
  const { gateway, url } = await res.gateway();
  const ran = { count: 0 };
  gateway.method('count', () => ++ran.count);
  gateway.method('add', ([a, b]: [number, number]) => a + b);
  return { gateway, url, ran };
}

const tabOf = (options: SharedClientOptions): SharedRpcClient =>
  shared.track(createSharedClient(options));

describe('a shared worker that never answers', () => {
  it('the first tab falls back on the error event, a tab attaching later after connectTimeoutMs: both open, both warn naming workerUrl, calls made meanwhile answered', async () => {
    const { gateway, url } = await countingGateway();
    vi.stubGlobal('WebSocket', WebSocket);
    const workers = fakeSharedWorkers();
    const logged = warnings();
    const consoleWarn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);

    const a = tabOf({ url, workerUrl, logger: logged.logger, connectTimeoutMs: 300 });
    const b = tabOf({ url, workerUrl, connectTimeoutMs: 300 });
    const sumB = b.call('add', [2, 3]);
    const newsB: unknown[] = [];
    gateway.topic('news');
    b.subscribe('news').subscribe((m) => newsB.push(m));
    workers.fail();
    expect(a.shared).toBe(false);
    await a.opened();
    expect(logged.warned).toEqual([
      { obj: { workerUrl }, msg: expect.stringContaining(`${workerUrl} failed to start`) },
    ]);

    // B heard nothing from the worker: it waits connectTimeoutMs, then connects on its own.
    expect(b.shared).toBe(true);
    expect(
      await settle(() => !b.shared && b.state === 'open', 3_000),
      'tab B on its own connection',
    ).toBe(true);
    expect(await sumB).toBe(5);
    await waitFor(() => (gateway.pubsub.topics()['news'] ?? 0) === 1, 'the subscription');
    await gateway.publish('news', 'one');
    await waitFor(() => newsB.length === 1, 'the message');
    expect(newsB).toEqual(['one']);
    expect(consoleWarn).toHaveBeenCalledTimes(1);
    expect(String(consoleWarn.mock.calls[0]![0])).toContain(
      `${workerUrl} did not answer within 300 ms`,
    );
    expect(gateway.sessions.size).toBe(2);
  });

  it.each(['its error event', 'the deadline'])(
    'a worker that answers after the tab fell back (by %s) runs none of what the tab posted, and keeps no connection for it',
    async (by) => {
      const { gateway, url, ran } = await countingGateway();
      vi.stubGlobal('WebSocket', WebSocket);
      const workers = fakeSharedWorkers();
      const host = shared.host();
      const logger = warnings().logger;
      // The tab that started the worker hears its error event (this one closes on it); one
      // attaching later does not.
      if (by === 'the deadline') tabOf({ url, workerUrl, logger, fallback: 'throw' });
      const tab = tabOf({ url, workerUrl, logger, connectTimeoutMs: 200 });
      const call = tab.call('count');
      tab.notify('count');
      tab.method('client.hello', () => 'hi');
      workers.fail();
      expect(await settle(() => !tab.shared, 3_000), 'the tab on the fallback').toBe(true);
      expect(await call).toBeGreaterThan(0);
      await waitFor(() => ran.count === 2, 'the call and the notification');
      const [session] = gateway.sessions.values();
      expect(await session!.call('client.hello')).toBe('hi');

      // The worker's script runs after all and reads what the tab posted it.
      workers.start((port) => host.connect(port));
      await sleep(300);
      expect(ran.count).toBe(2);
      expect(host.tabs).toBe(0);
      expect(host.client).toBeUndefined();
      expect(gateway.sessions.size).toBe(1);
    },
  );

  it("with fallback 'throw', a tab the worker never answers closes after connectTimeoutMs: what it made meanwhile rejects, naming why", async () => {
    const { url } = await countingGateway();
    fakeSharedWorkers();
    const logged = warnings();
    const tab = tabOf({
      url,
      workerUrl,
      fallback: 'throw',
      logger: logged.logger,
      connectTimeoutMs: 100,
    });
    const call = rejectionOf(tab.call('count'));
    const opened = rejectionOf(tab.opened());
    const [callError, openedError] = await Promise.race([
      Promise.all([call, opened]),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the tab never gave up on the worker')), 3_000),
      ),
    ]);
    expect(callError).toBeInstanceOf(ConnectionClosedError);
    expect((callError as Error).message).toMatch(/did not answer within 100 ms/);
    expect(openedError).toBe(callError);
    expect(tab.state).toBe('closed');
    expect(logged.warned).toHaveLength(1);
    expect(logged.warned[0]!.msg).toContain(workerUrl);
  });

  it('a worker that answers in time is kept: what the tab posted while waiting goes to it, once, and no fallback is taken', async () => {
    const { gateway, url, ran } = await countingGateway();
    const workers = fakeSharedWorkers();
    const host = shared.host();
    const logged = warnings();
    const tab = tabOf({ url, workerUrl, logger: logged.logger, connectTimeoutMs: 400 });
    const call = tab.call('count');
    tab.notify('count');
    await sleep(100);
    workers.start((port) => host.connect(port));
    expect(await call).toBeGreaterThan(0);
    await waitFor(() => ran.count === 2, 'the call and the notification');
    await sleep(500); // past the deadline
    expect(tab.shared).toBe(true);
    expect(logged.warned).toEqual([]);
    expect(ran.count).toBe(2);
    expect(gateway.sessions.size).toBe(1);
  });

  it('params JSON cannot carry reject at once while the worker has not answered, as they do once it has', async () => {
    const { url } = await countingGateway();
    fakeSharedWorkers();
    const tab = tabOf({ url, workerUrl, logger: silentLogger, connectTimeoutMs: 1_000 });
    const error = await rejectionOf(tab.call('count', [1n] as unknown as []));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/BigInt/);
  });

  it('a page hidden and shown again while the worker has not answered loses nothing: its call is answered once', async () => {
    const { url, ran } = await countingGateway();
    const page = new Map<string, (event: { persisted?: boolean }) => void>();
    vi.stubGlobal('addEventListener', (type: string, listener: () => void) =>
      page.set(type, listener),
    );
    vi.stubGlobal('removeEventListener', (type: string) => page.delete(type));
    const workers = fakeSharedWorkers();
    const host = shared.host();
    const tab = tabOf({ url, workerUrl, logger: silentLogger, connectTimeoutMs: 1_000 });
    const call = tab.call('count');
    page.get('pagehide')!({ persisted: true });
    page.get('pageshow')!({ persisted: true });
    workers.start((port) => host.connect(port));
    expect(await call).toBe(1);
    expect(tab.shared).toBe(true);
    expect(await tab.call('count')).toBe(2);
    expect(ran.count).toBe(2);
    expect(host.tabs).toBe(1);
    await tab.close(); // while the page's listeners can still be removed
  });
});
