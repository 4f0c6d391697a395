/**
 * Tabs and a shared worker of different versions of the tab/worker messages: a tab states its
 * version in its hello, the worker in its first answer (`welcome`, or the `fail` that refuses a
 * tab of another version). A tab whose worker speaks another version, or none (a worker from
 * before the version was stated), posts it nothing it held and closes: its calls reject and its
 * state and last disconnect say which versions met and what fixes it. Run with the real code of
 * both sides: this version's, and the same code built as the next version (esbuild, the
 * constant changed); a worker of version 1 is this one with what version 1 did not post taken
 * out of its messages. The default worker name carries the version.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { WebSocket } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConnectionClosedError } from '../../src/client/index.js';
import type { DisconnectEvent } from '../../src/client/index.js';
import { createSharedClient } from '../../src/client/shared/index.js';
import type { SharedRpcClient } from '../../src/client/shared/index.js';
import type * as sharedEntry from '../../src/client/shared/index.js';
import { SHARED_PROTOCOL_VERSION } from '../../src/client/shared/messages.js';
import type { HostMessage, TabMessage } from '../../src/client/shared/messages.js';
import type { Logger } from '../../src/peer/logger.js';
import { silentLogger } from '../../src/peer/logger.js';
import { bundleForNode } from '../support/bundle.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor, within } from '../support/waiting.js';

type SharedModule = typeof sharedEntry;

const res = new Resources();
const shared = new SharedTabs();
const ports: MessagePort[] = [];
/** Made by the next version's code, closed after each test. */
const others: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(others.splice(0).map((made) => made.close()));
  for (const port of ports.splice(0)) port.close();
  await shared.cleanup();
  await res.cleanup();
  vi.unstubAllGlobals();
});

const NEXT = SHARED_PROTOCOL_VERSION + 1;
/** Both sides as the next version builds them: this source with the constant raised. */
let next: SharedModule;
let nextDir = '';

beforeAll(async () => {
  const { script, dir } = await bundleForNode('src/client/shared/index.ts', {
    plugins: [
      {
        name: 'next-version',
        setup(b) {
          b.onLoad({ filter: /src\/client\/shared\/messages\.ts$/ }, (args) => {
            const source = readFileSync(args.path, 'utf8');
            const raised = source.replace(
              /export const SHARED_PROTOCOL_VERSION = \d+;/,
              `export const SHARED_PROTOCOL_VERSION = ${NEXT};`,
            );
            expect(raised).not.toBe(source);
            return { contents: raised, loader: 'ts' };
          });
        },
      },
    ],
  });
  nextDir = dir;
  next = (await import(/* @vite-ignore */ pathToFileURL(script).href)) as SharedModule;
}, 60_000);
afterAll(async () => {
  const { rmSync } = await import('node:fs');
  if (nextDir) rmSync(nextDir, { recursive: true, force: true });
});

/** A gateway counting its sessions and the calls of `count` it runs. */
async function countingGateway() {
  const { gateway, url } = await res.gateway();
  const ran = { count: 0 };
  gateway.method('count', () => ++ran.count);
  return { gateway, url, ran };
}

/** A logger that keeps what it logs at error. */
function errors() {
  const logged: { obj: unknown; msg: string | undefined }[] = [];
  const logger: Logger = {
    ...silentLogger,
    error: (obj: unknown, msg?: string) => void logged.push({ obj, msg }),
    child: () => logger,
  };
  return { logger, logged };
}

/**
 * A port to `host` that passes the tab's messages on and the worker's back through `answer`
 * (undefined: not passed), recording what the tab posted.
 */
function relay(
  host: { connect(port: MessagePort): void },
  answer: (m: HostMessage) => HostMessage | undefined,
) {
  const tabSide = new MessageChannel();
  const hostSide = new MessageChannel();
  ports.push(tabSide.port2, hostSide.port1);
  const posted: TabMessage[] = [];
  tabSide.port2.onmessage = (event: MessageEvent) => {
    posted.push(event.data as TabMessage);
    hostSide.port1.postMessage(event.data);
  };
  hostSide.port1.onmessage = (event: MessageEvent) => {
    const m = answer(event.data as HostMessage);
    if (m) tabSide.port2.postMessage(m);
  };
  host.connect(hostSide.port2);
  return { port: tabSide.port1, posted };
}

/** What a worker of version 1 posts: no `welcome`, and no version on anything. */
function asVersion1(m: HostMessage): HostMessage | undefined {
  if (m.t === 'welcome') return undefined;
  const { v: _v, ...rest } = m as HostMessage & { v?: number };
  return rest as HostMessage;
}

/** A tab's disconnect events, as it reports them. */
function disconnectsOf(tab: SharedRpcClient): DisconnectEvent[] {
  const seen: DisconnectEvent[] = [];
  tab.disconnects$.subscribe((event) => seen.push(event));
  return seen;
}

/** Expect `tab` closed with `error`, told everywhere the tab reports its state. */
async function expectClosedWith(
  tab: SharedRpcClient,
  seen: DisconnectEvent[],
  error: Error,
): Promise<void> {
  expect(tab.state).toBe('closed');
  expect(await rejectionOf(tab.opened())).toBe(error);
  expect(await rejectionOf(tab.call('count'))).toBe(error);
  expect(tab.lastDisconnect).toEqual({ reason: error.message, error, willRetry: false });
  expect(seen).toEqual([tab.lastDisconnect]);
}

describe('the tab/worker version handshake', () => {
  it('a tab and a worker of one version: the hello states it, the worker answers welcome first, and the call is answered', async () => {
    const { url, ran } = await countingGateway();
    const host = shared.host();
    const { port, posted } = relay(host, (m) => m);
    const got: HostMessage[] = [];
    // The tab's own port, seen from its side: every message it reads.
    port.addEventListener('message', (event) => got.push(event.data as HostMessage));
    const tab = shared.track(createSharedClient({ url, worker: () => ({ port }) }));
    expect(await within(tab.call('count'), 'the call')).toBe(1);
    expect(ran.count).toBe(1);
    expect(posted[0]).toMatchObject({ t: 'hello', v: SHARED_PROTOCOL_VERSION });
    // With the worker client's whenDisconnected, which the tab's notify acts on.
    expect(got[0]).toEqual({ t: 'welcome', v: SHARED_PROTOCOL_VERSION, whenDisconnected: 'queue' });
  });

  it('a worker of version 1, which states no version, is given nothing: the tab closes at its first answer, saying to reload the other tabs', async () => {
    const { gateway, url, ran } = await countingGateway();
    const host = shared.host();
    const { port, posted } = relay(host, asVersion1);
    const { logger, logged } = errors();
    const tab = shared.track(
      // A deadline far off: the tab does not wait for it, the worker's first answer tells it.
      createSharedClient({ url, worker: () => ({ port }), logger, connectTimeoutMs: 60_000 }),
    );
    const seen = disconnectsOf(tab);
    const call = tab.call('count');
    tab.notify('count');
    const error = await within(rejectionOf(call), 'the call rejected', 5_000);
    expect(error).toBeInstanceOf(ConnectionClosedError);
    expect((error as Error).message).toBe(
      `The shared worker speaks the tab/worker protocol version 1 (from before the version was stated) and this tab version ${SHARED_PROTOCOL_VERSION}; the worker is older, kept alive by another tab of this site that runs older code (same script URL and name): reload or close the other tabs. A createSharedClient \`name\` that changes with each version of the code gives each version a worker of its own.`,
    );
    await expectClosedWith(tab, seen, error as Error);
    expect(tab.shared).toBe(true);
    expect(logged).toEqual([
      { obj: { workerUrl: undefined, err: error }, msg: (error as Error).message },
    ]);
    // Nothing but the hello and the bye that lets it go there: the worker took the hello.
    await waitFor(() => posted.length === 2, 'the bye');
    expect(posted.map((m) => m.t)).toEqual(['hello', 'bye']);
    await waitFor(() => host.tabs === 0, 'the worker letting the tab go');
    expect(ran.count).toBe(0);
    await waitFor(() => gateway.sessions.size === 0, 'the connection made for the hello closed');
  });

  it('a worker of the next version (its real code) refuses the hello: the tab closes, saying to reload it', async () => {
    const { gateway, url, ran } = await countingGateway();
    const host = next.createClientHost({ WebSocket });
    others.push(host);
    const { port, posted } = relay(host, (m) => m);
    const tab = shared.track(
      createSharedClient({ url, worker: () => ({ port }), logger: errors().logger }),
    );
    const seen = disconnectsOf(tab);
    const error = await within(rejectionOf(tab.call('count')), 'the call rejected', 5_000);
    expect(error).toBeInstanceOf(ConnectionClosedError);
    expect((error as Error).message).toContain(
      `The shared worker speaks the tab/worker protocol version ${NEXT} and this tab version ${SHARED_PROTOCOL_VERSION}; this tab runs older code than the worker: reload this tab.`,
    );
    await expectClosedWith(tab, seen, error as Error);
    await waitFor(() => posted.length === 2, 'the bye');
    expect(posted.map((m) => m.t)).toEqual(['hello', 'bye']);
    expect(host.tabs).toBe(0);
    expect(host.client).toBeUndefined();
    expect(gateway.sessions.size).toBe(0);
    expect(ran.count).toBe(0);
  });

  it('a tab of the next version (its real code) is refused by this worker, which makes no connection for it; a tab of this version is served as ever', async () => {
    const { gateway, url, ran } = await countingGateway();
    const host = shared.host();
    const channel = new MessageChannel();
    host.connect(channel.port2);
    const newer = next.createSharedClient({
      url,
      worker: () => ({ port: channel.port1 }),
      logger: errors().logger,
    });
    others.push(newer);
    const error = await within(rejectionOf(newer.call('count')), 'the call rejected', 5_000);
    expect((error as Error).name).toBe('ConnectionClosedError');
    expect((error as Error).message).toContain(
      `The shared worker speaks the tab/worker protocol version ${SHARED_PROTOCOL_VERSION} and this tab version ${NEXT}; the worker is older`,
    );
    expect(newer.state).toBe('closed');
    expect(newer.lastDisconnect?.error).toBe(error);
    expect(host.tabs).toBe(0);
    expect(host.client).toBeUndefined();
    expect(gateway.sessions.size).toBe(0);

    const tab = shared.tab(host, url).tab;
    expect(await within(tab.call('count'), 'the call')).toBe(1);
    expect(ran.count).toBe(1);
    expect(host.tabs).toBe(1);
  });

  it('a tab of version 1 (a hello without a version) gets a fail it reads, saying to reload it; what it posts after is not read', async () => {
    const { url } = await countingGateway();
    const host = shared.host();
    const channel = new MessageChannel();
    ports.push(channel.port1);
    const got: HostMessage[] = [];
    channel.port1.onmessage = (event: MessageEvent) => got.push(event.data as HostMessage);
    host.connect(channel.port2);
    channel.port1.postMessage({ t: 'hello', options: { url: [url] }, token: false });
    // What a tab of version 1 posts once answered: what it held meanwhile.
    channel.port1.postMessage({ t: 'call', id: 1, method: 'count', params: undefined });
    channel.port1.postMessage({ t: 'sub', id: 2, topic: 'news', params: undefined });
    await waitFor(() => got.length > 0, 'an answer to the hello');
    expect(got[0]).toEqual({
      t: 'fail',
      v: SHARED_PROTOCOL_VERSION,
      error: {
        name: 'ConnectionClosedError',
        message: expect.stringContaining(
          `The shared worker speaks the tab/worker protocol version ${SHARED_PROTOCOL_VERSION} and this tab version 1 (from before the version was stated); this tab runs older code than the worker: reload this tab.`,
        ),
        fields: {},
      },
    });
    // The tab code of every version closes on a `fail`, with the error it carries.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(got).toHaveLength(1);
    expect(host.tabs).toBe(0);
    expect(host.client).toBeUndefined();
  });

  it('the default worker name carries the version: tabs of another version get a worker of their own', () => {
    const names: (string | undefined)[] = [];
    class RecordingSharedWorker {
      readonly port: MessagePort;
      constructor(_url: string, options: { name?: string }) {
        names.push(options.name);
        const channel = new MessageChannel();
        ports.push(channel.port1, channel.port2);
        this.port = channel.port1;
      }
    }
    vi.stubGlobal('SharedWorker', RecordingSharedWorker);
    const url = 'ws://127.0.0.1:9/rpc';
    const workerUrl = 'http://127.0.0.1/shared-worker.js';
    shared.track(createSharedClient({ url, workerUrl }));
    shared.track(createSharedClient({ url, workerUrl, name: 'app-build-42' }));
    others.push(next.createSharedClient({ url, workerUrl }));
    expect(names).toEqual([
      `wsrpc v${SHARED_PROTOCOL_VERSION} ${url}`,
      'app-build-42',
      `wsrpc v${NEXT} ${url}`,
    ]);
  });
});
