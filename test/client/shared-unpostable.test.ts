/*
 * The shared worker's promise to its tabs, for what the worker's client reads but cannot post
 * to a tab (JSON nested thousands of levels deep: the client parses any depth, structured
 * cloning throws RangeError): a subscription's message is told to the tab as a gap signal
 * (`{ gap: 1 }`, as for a message the server says is lost), never dropped in silence; a
 * server-to-tab call is answered -32603 with `data.reason` and frees the tab's run slot; a
 * notification is logged in the tab (its method, and why); a message of the user's inbox is told
 * on the tab's `inboxGaps$` as a gap of 1 besides.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { Logger } from '../../src/peer/logger.js';
import { silentLogger } from '../../src/peer/logger.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { FakeGateways, framesOf, note, reply } from '../support/fake-gateway.js';
import type { ClientFrame } from '../support/fake-gateway.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor } from '../support/waiting.js';

const gateways = new FakeGateways();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await gateways.cleanup();
});

const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);

describe('the shared worker and what it cannot post to a tab', () => {
  it('a subscription message nested 10 000 deep reaches the tab as a gap signal of 1, then message 2', async () => {
    const gw = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const frame of framesOf(data)) {
          if (frame.method !== 'subscribe') continue;
          reply(socket, frame.id, 's1');
          note(socket, { subscription: 's1', seq: 0 }); // the position
          socket.send(
            `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"s1","seq":1,"result":${deep(10_000)}}}`,
          );
          note(socket, { subscription: 's1', seq: 2, result: 'two' });
        }
      });
    });
    const host = shared.host();
    const { tab } = shared.tab(host, gw.url);
    const events: SubscriptionEvent<unknown>[] = [];
    const sub = tab.subscribeWithMeta('t').subscribe((e) => events.push(e));
    try {
      await waitFor(() => events.some((e) => e.seq === 2), 'message 2');
      // Message 1 is told as the gap signal a lost message gets, in its place.
      expect(events).toEqual([
        { data: undefined, gap: 1 },
        { data: 'two', seq: 2 },
      ]);
    } finally {
      sub.unsubscribe();
    }
  });

  it('a server-to-tab call it cannot post is answered -32603 with data.reason, its run slot freed', async () => {
    const answers: ClientFrame[] = [];
    let server: WebSocket | undefined;
    const gw = await gateways.listen((socket) => {
      server = socket;
      socket.on('message', (data) => {
        for (const frame of framesOf(data)) if (frame.method === undefined) answers.push(frame);
      });
    });
    const host = shared.host({ maxRunsPerTab: 1 });
    const { tab } = shared.tab(host, gw.url);
    await tab.opened();
    tab.method('echo', (params) => params);
    await waitFor(() => host.client?.registry.has('echo') === true, 'the handler registered');
    server!.send(`{"jsonrpc":"2.0","id":7,"method":"echo","params":[${deep(10_000)}]}`);
    await waitFor(() => answers.some((a) => a.id === 7), 'the answer to call 7');
    const answer = answers.find((a) => a.id === 7) as ClientFrame & {
      error?: { code: number; data?: { reason?: unknown } };
    };
    expect(answer.error?.code).toBe(-32603);
    expect(answer.error?.data?.reason).toMatch(/could not post it to the tab \(RangeError/);
    // The one run slot is free: the next call runs in the tab (not -32000 Server busy).
    server!.send('{"jsonrpc":"2.0","id":8,"method":"echo","params":[1]}');
    await waitFor(() => answers.some((a) => a.id === 8), 'the answer to call 8');
    expect(answers.find((a) => a.id === 8)).toMatchObject({ result: [1] });
  });

  it('a notification it cannot post is logged in the tab with its method and why', async () => {
    let server: WebSocket | undefined;
    const gw = await gateways.listen((socket) => {
      server = socket;
    });
    const logged: { obj: unknown; msg: string | undefined }[] = [];
    const logger: Logger = {
      ...silentLogger,
      error: (obj: unknown, msg?: string) => void logged.push({ obj, msg }),
      child: () => logger,
    };
    const host = shared.host();
    const { tab } = shared.tab(host, gw.url, { logger });
    const methods: string[] = [];
    const watch = tab.notifications$.subscribe((n) => methods.push(n.method));
    try {
      await tab.opened();
      await waitFor(() => server !== undefined, 'the connection');
      server!.send(`{"jsonrpc":"2.0","method":"big","params":[${deep(10_000)}]}`);
      server!.send('{"jsonrpc":"2.0","method":"small","params":[1]}');
      await waitFor(() => methods.includes('small'), 'the next notification');
      expect(methods).toEqual(['small']);
      expect(logged).toHaveLength(1);
      expect(logged[0]!.msg).toBe(
        'a notification from the server could not be passed to this tab: lost',
      );
      const { err, method } = logged[0]!.obj as { err: { code?: number }; method: string };
      expect(method).toBe('big');
      expect(err.code).toBe(-32603);
    } finally {
      watch.unsubscribe();
    }
  });

  it("a message of the user's inbox it cannot post reaches the tab's inboxGaps$ as a gap of 1, in its place", async () => {
    const gw = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const frame of framesOf(data)) {
          if (frame.method !== 'subscribe') continue;
          reply(socket, frame.id, 'inbox');
          note(socket, { subscription: 'inbox', seq: 0 }); // the position
          note(socket, { subscription: 'inbox', seq: 1, result: { method: 'm', params: [1] } });
          socket.send(
            `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"inbox","seq":2,"result":{"method":"m","params":[${deep(10_000)}]}}}`,
          );
          note(socket, { subscription: 'inbox', seq: 3, result: { method: 'm', params: [3] } });
        }
      });
    });
    const host = shared.host();
    const { tab } = shared.tab(host, gw.url, { inbox: true });
    const seen: unknown[] = [];
    const watches = [
      tab.notificationsOf('m').subscribe((params) => seen.push(params)),
      tab.inboxGaps$.subscribe((gap) => seen.push(gap)),
    ];
    // A second observer of the gaps: each is told once.
    const gaps: unknown[] = [];
    watches.push(tab.inboxGaps$.subscribe((gap) => gaps.push(gap)));
    try {
      await tab.opened();
      await waitFor(() => seen.some((v) => Array.isArray(v) && v[0] === 3), 'message 3');
      expect(seen).toEqual([[1], { gap: 1 }, [3]]);
      expect(gaps).toEqual([{ gap: 1 }]);
    } finally {
      for (const watch of watches) watch.unsubscribe();
    }
  });
});
