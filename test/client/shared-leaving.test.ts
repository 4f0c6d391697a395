/**
 * Tabs leaving and coming: a tab that connects after the worker's client stopped for good gets a
 * new client, even while a frozen tab still holds the stopped one (which stays told why it
 * closed); what a page sends from its own pagehide listener, after the tab's bye, still goes out;
 * a tab's notify acts on the worker client's whenDisconnected, not on its own option.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { NotConnectedError } from '../../src/client/index.js';
import type { SharedRpcClient } from '../../src/client/shared/index.js';
import { freePort } from '../support/network.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { FreezablePort, SharedTabs } from '../support/shared-tabs.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await res.cleanup();
  vi.unstubAllGlobals();
});

describe('a tab after the worker client stopped for good', () => {
  it('gets a new client while a frozen tab holds the stopped one; the frozen tab, once awake, is told why it closed', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('ping', () => 'pong');
    const host = shared.host({ reconnect: false });
    const a = shared.tab(host, url).tab;
    let frozen!: FreezablePort;
    const b = shared.tab(host, url, {}, (port) => {
      frozen = new FreezablePort(port);
      return frozen as unknown as MessagePort;
    }).tab;
    await Promise.all([a.opened(), b.opened()]);
    frozen.frozen = true;
    // A drop, and no reconnecting: the worker's client stops for good.
    [...gateway.sessions.values()][0]!.close(4000, 'bye');
    const why = await rejectionOf(a.call('ping'));
    expect(a.state).toBe('closed');
    await waitFor(() => host.tabs === 1, 'the closed tab to say bye'); // the frozen one is left

    const c = shared.tab(host, url).tab;
    expect(await c.call('ping')).toBe('pong');
    expect(c.state).toBe('open');
    expect(c.lastDisconnect).toBeUndefined();
    expect(gateway.sessions.size).toBe(1);

    frozen.thaw();
    await waitFor(() => b.state === 'closed', 'the frozen tab to read that its client closed');
    const bWhy = await rejectionOf(b.call('ping'));
    expect(bWhy).toBeInstanceOf((why as Error).constructor);
    expect((bWhy as Error).message).toBe((why as Error).message);
    expect(a.state).toBe('closed');
    // The new tab's connection is its own: the old tabs' leaving does not touch it.
    expect(await c.call('ping')).toBe('pong');
    expect(host.tabs).toBe(1);
  });
});

/** Stands in for the page's window: its pagehide and pageshow listeners, in order. */
function page() {
  type Listener = (event: { persisted?: boolean }) => void;
  const listeners: { type: string; listener: Listener }[] = [];
  const add = (type: string, listener: Listener): void => void listeners.push({ type, listener });
  vi.stubGlobal('addEventListener', add);
  vi.stubGlobal('removeEventListener', (type: string, listener: () => void) => {
    const at = listeners.findIndex((l) => l.type === type && l.listener === listener);
    if (at >= 0) listeners.splice(at, 1);
  });
  return {
    add,
    fire: (type: string, event: { persisted?: boolean }) => {
      for (const l of [...listeners]) if (l.type === type) l.listener(event);
    },
  };
}

describe("what a page sends from its own pagehide listener, after the tab's bye", () => {
  it('a last notification and a call reach the gateway; back from the cache, the tab starts over', async () => {
    const { gateway, url } = await res.gateway();
    const seen: unknown[] = [];
    gateway.method('bye.analytics', (p) => void seen.push(p));
    gateway.method('save', (p) => {
      seen.push(p);
      return 'saved';
    });
    gateway.method('ping', () => 'pong');
    const host = shared.host();
    const keeper = shared.tab(host, url).tab; // another tab keeps the connection
    const window = page();
    const tab = shared.tab(host, url).tab; // its pagehide listener comes first
    await Promise.all([keeper.opened(), tab.opened()]);
    let save: Promise<unknown> | undefined;
    window.fire('pagehide', {}); // nothing of the app's yet: the tab leaves, and comes back
    window.fire('pageshow', { persisted: true });
    expect(await tab.call('ping')).toBe('pong');

    // The app's own listener, registered after the tab's.
    window.add('pagehide', () => {
      tab.notify('bye.analytics', { left: true });
      save = tab.call('save', { draft: 1 });
    });
    window.fire('pagehide', { persisted: true });
    await waitFor(() => seen.length === 2, 'the notification and the call');
    expect(seen).toEqual([{ left: true }, { draft: 1 }]);
    expect(host.tabs).toBe(1);

    // Its answer is not read (the tab had left): the call rejects as the tab starts over.
    window.fire('pageshow', { persisted: true });
    expect(((await rejectionOf(save!)) as Error).name).toBe('ConnectionClosedError');
    expect(await tab.call('ping')).toBe('pong');
    expect(host.tabs).toBe(2);
  });
});

describe("a tab's notify and the worker client's whenDisconnected", () => {
  /** A gateway URL nothing listens on yet, and a way to start it there. */
  const later = async () => {
    const port = await freePort();
    return {
      url: `ws://127.0.0.1:${port}/rpc`,
      start: () => res.gateway({}, port),
    };
  };
  const dialFailed = (tab: SharedRpcClient) =>
    waitFor(() => tab.lastDisconnect !== undefined, 'a failed dial, told by the worker');

  it("'reject' fixed in the worker script: a tab that says nothing throws, as the worker's client would", async () => {
    const { url } = await later();
    const host = shared.host({ whenDisconnected: 'reject' });
    const tab = shared.tab(host, url).tab;
    await dialFailed(tab);
    expect(await rejectionOf(tab.call('x'))).toBeInstanceOf(NotConnectedError);
    expect(() => tab.notify('note', { n: 1 })).toThrow(NotConnectedError);
  });

  it("'queue' from the first tab: a tab of its own 'reject' queues its notification, which is sent on connecting", async () => {
    const { url, start } = await later();
    const host = shared.host();
    const first = shared.tab(host, url).tab;
    const second = shared.tab(host, url, { whenDisconnected: 'reject' }).tab;
    await Promise.all([dialFailed(first), dialFailed(second)]);
    second.notify('note', { n: 1 });
    const { gateway } = await start();
    const noted: unknown[] = [];
    gateway.method('note', (p) => void noted.push(p));
    await waitFor(() => noted.length === 1, 'the queued notification');
    expect(noted).toEqual([{ n: 1 }]);
  });
});
