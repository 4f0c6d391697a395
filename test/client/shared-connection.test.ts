/**
 * The shared connection's two sides in Node: tabs made with createSharedClient, each over a
 * MessageChannel to one createClientHost (what a SharedWorker runs), against a real gateway.
 * Only the SharedWorker itself is stood in for: the `worker` option hands each tab a port
 * whose other end the host serves, as a SharedWorker's connect event would.
 */
import { firstValueFrom } from 'rxjs';
import { filter } from 'rxjs/operators';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  AuthenticationError,
  CancelledError,
  JsonRpcError,
  NotConnectedError,
  TimeoutError,
  type SubscriptionStatus,
} from '../../src/client/index.js';
import { createSharedClient } from '../../src/client/shared/index.js';
import type {
  ClientHostOptions,
  SharedClientOptions,
  SharedRpcClient,
} from '../../src/client/shared/index.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { FreezablePort, SharedTabs } from '../support/shared-tabs.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await res.cleanup();
});

/** One host (the worker) on a gateway, and a way to open tabs on it. */
function sharedConnection(url: string, options: ClientHostOptions = {}) {
  const host = shared.host(options);
  /** Each tab's own end of its channel, to cut it as a crashed tab would. */
  const ports = new Map<SharedRpcClient, MessagePort>();
  const open = (extra: Partial<SharedClientOptions> = {}, freezable = false) => {
    let frozen: FreezablePort | undefined;
    const { tab, port } = shared.tab(host, url, extra, (port) =>
      freezable ? ((frozen = new FreezablePort(port)) as unknown as MessagePort) : port,
    );
    ports.set(tab, port);
    return { tab, port, frozen };
  };
  return {
    host,
    open: (extra?: Partial<SharedClientOptions>) => open(extra).tab,
    openFull: open,
    ports,
  };
}

/** The gateway's local subscriptions to `topic` (all sessions). */
const subscriptions = (gateway: Gateway, topic: string): number =>
  gateway.pubsub.topics()[topic] ?? 0;

const status = (tab: SharedRpcClient, topic: string, state: SubscriptionStatus['state']) =>
  firstValueFrom(tab.subscriptionStatus$(topic).pipe(filter((s) => s.state === state)));

const onlySession = (gateway: Gateway): Session<unknown> => {
  expect(gateway.sessions.size).toBe(1);
  return [...gateway.sessions.values()][0]!;
};

describe('createSharedClient over one host', () => {
  it('three tabs, one session: one wire subscription per topic, calls, and the last tab on a topic releases it', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const { open } = sharedConnection(url);
    const [a, b, c] = [open(), open(), open()];
    await Promise.all([a.opened(), b.opened(), c.opened()]);
    expect(gateway.sessions.size).toBe(1);

    const got: Record<string, unknown[]> = { a: [], b: [] };
    a.subscribe('news').subscribe((m) => got['a']!.push(m));
    b.subscribe('news').subscribe((m) => got['b']!.push(m));
    // Each tab's status follows its own subscribe on its port: both are attached once they tell.
    await status(a, 'news', 'subscribed');
    await status(b, 'news', 'subscribed');
    expect(subscriptions(gateway, 'news')).toBe(1);
    expect(gateway.pubsub.subscriptionCount(onlySession(gateway))).toBe(1);
    await gateway.publish('news', { n: 1 });
    await waitFor(() => got['a']!.length === 1 && got['b']!.length === 1, 'both tabs to get it');
    expect(got).toEqual({ a: [{ n: 1 }], b: [{ n: 1 }] });

    expect(await c.call('add', [20, 22])).toBe(42);

    await b.close();
    await gateway.publish('news', { n: 2 });
    await waitFor(() => got['a']!.length === 2, 'a to get the second');
    expect(subscriptions(gateway, 'news')).toBe(1);
    await a.close();
    await waitFor(() => subscriptions(gateway, 'news') === 0, 'the subscription to end');
    expect(gateway.sessions.size).toBe(1); // c still holds the connection
    expect(got['b']).toEqual([{ n: 1 }]);
  });

  it('a server-to-client call goes to the first tab that registered it, and to the next once that tab is gone', async () => {
    const { gateway, url } = await res.gateway();
    const { host, open, ports } = sharedConnection(url);
    const first = open();
    const second = open();
    await Promise.all([first.opened(), second.opened()]);
    first.method('who', () => 'first');
    await waitFor(() => host.client?.registry.has('who') === true, 'the registration');
    second.method('who', (_params, ctx) => `second ${ctx.method}`);
    const session = onlySession(gateway);
    expect(await session.call('who')).toBe('first');
    expect(await session.call('who')).toBe('first');

    // A tab that dies (its port closes, no bye) while running a call: the call goes on to the next.
    const started = deferred();
    const stuck = open();
    const third = open();
    await Promise.all([stuck.opened(), third.opened()]);
    await first.close();
    await second.close();
    stuck.method('slow', () => {
      started.resolve();
      return new Promise(() => undefined);
    });
    await waitFor(() => host.client?.registry.has('slow') === true, 'slow registered');
    third.method('slow', () => 'from third');
    const answer = session.call('slow');
    await started.promise;
    ports.get(stuck)!.close();
    expect(await answer).toBe('from third');

    await third.close();
    await waitFor(() => gateway.sessions.size === 0, 'the last tab to end the session');
  });

  it('a tab that stops answering the heartbeat is let go; a frozen tab that wakes up comes back', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.topic('sport');
    gateway.method('ping', () => 'pong');
    const { openFull } = sharedConnection(url, { tabHeartbeatMs: 50 });
    const { tab: keeper } = openFull();
    const { tab: sleeper, frozen } = openFull({}, true);
    await Promise.all([keeper.opened(), sleeper.opened()]);
    keeper.subscribe('news').subscribe();
    const slept: unknown[] = [];
    sleeper.subscribe('sport').subscribe((m) => slept.push(m));
    await waitFor(
      () => subscriptions(gateway, 'sport') === 1 && subscriptions(gateway, 'news') === 1,
      'both subscriptions',
    );
    frozen!.frozen = true;
    await waitFor(
      () => subscriptions(gateway, 'sport') === 0,
      "the frozen tab's subscription to end",
    );
    expect(gateway.sessions.size).toBe(1);

    frozen!.thaw();
    await waitFor(() => subscriptions(gateway, 'sport') === 1, 'the tab to subscribe again');
    expect(await sleeper.call('ping')).toBe('pong');
    await status(sleeper, 'sport', 'subscribed');
    await gateway.publish('sport', 'goal');
    await waitFor(() => slept.length === 1, 'the message');
    expect(slept).toEqual(['goal']);
  });

  it('a notify whose params JSON cannot carry throws in the tab, as RpcClient.notify does, and posts nothing', async () => {
    const { gateway, url } = await res.gateway();
    const noted: unknown[] = [];
    gateway.method('note', (params) => void noted.push(params));
    const { open } = sharedConnection(url);
    const tab = open();
    await tab.opened();
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    expect(() => tab.notify('note', [1n])).toThrow(TypeError);
    expect(() => tab.notify('note', cycle)).toThrow(TypeError);
    tab.notify('note', ['fine']);
    await waitFor(() => noted.length === 1, 'the good notification');
    expect(noted).toEqual([['fine']]);
  });

  it('a tab let go and come back hears of a gap of unknown size on each subscription and status; what came meanwhile is not passed off as continuous', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.topic('sport');
    const { openFull } = sharedConnection(url, { tabHeartbeatMs: 50 });
    const { tab: keeper } = openFull();
    const { tab: sleeper, frozen } = openFull({}, true);
    await Promise.all([keeper.opened(), sleeper.opened()]);
    // The keeper holds the session; the sleeper alone holds 'sport'.
    keeper.subscribe('news').subscribe();
    const events: unknown[] = [];
    sleeper.subscribeWithMeta<string>('sport').subscribe((e) => events.push(e));
    const states: SubscriptionStatus[] = [];
    sleeper.subscriptionStatus$('sport').subscribe((s) => states.push(s));
    await status(sleeper, 'sport', 'subscribed');
    await gateway.publish('sport', 'kick-off');
    await waitFor(() => events.length === 1, 'the first message');
    frozen!.frozen = true;
    await waitFor(() => subscriptions(gateway, 'sport') === 0, 'the sleeper to be let go');
    // Published while the sleeper is let go: it never gets it.
    await gateway.publish('sport', 'goal');
    frozen!.thaw();
    await waitFor(() => subscriptions(gateway, 'sport') === 1, 'the tab to subscribe again');
    await status(sleeper, 'sport', 'subscribed');
    await gateway.publish('sport', 'final whistle');
    await waitFor(() => events.length === 3, 'the message after the gap');
    expect(events.map((e) => ({ ...(e as object), seq: undefined }))).toEqual([
      { data: 'kick-off', seq: undefined },
      { data: undefined, gap: null, seq: undefined },
      { data: 'final whistle', seq: undefined },
    ]);
    expect(states.filter((s) => s.state === 'gap')).toEqual([{ state: 'gap', missed: null }]);
  });

  it('a lone tab that wakes up after being let go comes back on one new connection, and calls at once', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('ping', () => 'pong');
    let dials = 0;
    class CountedWebSocket extends WebSocket {
      constructor(...args: ConstructorParameters<typeof WebSocket>) {
        super(...args);
        dials++;
      }
    }
    const { openFull } = sharedConnection(url, {
      tabHeartbeatMs: 50,
      WebSocket: CountedWebSocket,
    });
    const { tab, frozen } = openFull({}, true);
    await tab.opened();
    frozen!.frozen = true;
    await waitFor(() => gateway.sessions.size === 0, 'the host to let the frozen tab go');
    // Waking up, the tab reads the pings it missed (and answers them) and then 'gone'.
    frozen!.thaw();
    expect(await tab.call('ping')).toBe('pong');
    await waitFor(() => gateway.sessions.size === 1, 'the session of the tab come back');
    expect(dials).toBe(2);
  });

  it("a page back from the back-forward cache says hello once, whatever 'gone' it reads on the way", async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('ping', () => 'pong');
    const page = new Map<string, (event: { persisted?: boolean }) => void>();
    vi.stubGlobal('addEventListener', (type: string, listener: () => void) =>
      page.set(type, listener),
    );
    vi.stubGlobal('removeEventListener', (type: string) => page.delete(type));
    try {
      let dials = 0;
      class CountedWebSocket extends WebSocket {
        constructor(...args: ConstructorParameters<typeof WebSocket>) {
          super(...args);
          dials++;
        }
      }
      const { openFull } = sharedConnection(url, { WebSocket: CountedWebSocket });
      const { tab, frozen } = openFull({}, true);
      await tab.opened();
      page.get('pagehide')!({ persisted: true });
      await waitFor(() => gateway.sessions.size === 0, 'the host to let the hidden tab go');
      // The host's answer to something the page posted on its way into the cache, read as it
      // comes back: the tab starts over once, not once for it and once for pageshow.
      frozen!.onmessage!({ data: { t: 'gone' } } as MessageEvent);
      page.get('pageshow')!({ persisted: true });
      expect(await tab.call('ping')).toBe('pong');
      expect(dials).toBe(2);
      await tab.close(); // while the page's listeners can still be removed
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('errors keep their class and fields both ways', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('refuse', () => {
      throw new JsonRpcError(4001, 'no such order', { order: 7 });
    });
    gateway.method('never', (_params, ctx) => untilAborted(ctx.signal));
    const { host, open } = sharedConnection(url);
    const tab = open();
    await tab.opened();
    const refused = await rejectionOf(tab.call('refuse'));
    expect(refused).toBeInstanceOf(JsonRpcError);
    expect(refused).toMatchObject({ code: 4001, message: 'no such order', data: { order: 7 } });
    const late = await rejectionOf(tab.call('never', [], { timeoutMs: 50 }));
    expect(late).toBeInstanceOf(TimeoutError);
    expect(late).toMatchObject({ method: 'never', timeoutMs: 50 });

    tab.method('check', () => {
      throw new JsonRpcError(4002, 'not here', { why: 'tab' });
    });
    tab.method('crash', () => {
      throw new Error('secret detail');
    });
    const session = onlySession(gateway);
    await waitFor(() => host.client?.registry.has('crash') === true, 'the handlers');
    expect(await rejectionOf(session.call('check'))).toMatchObject({
      code: 4002,
      message: 'not here',
      data: { why: 'tab' },
    });
    const crashed = await rejectionOf(session.call('crash'));
    expect(crashed).toMatchObject({ code: -32603 });
    expect(JSON.stringify(crashed)).not.toContain('secret detail');
    expect(await rejectionOf(session.call('nobody'))).toMatchObject({ code: -32601 });
  });

  it("the connection's token comes from a tab's getToken (in-band)", async () => {
    const { gateway, url } = await res.gateway<{ user: string }>({
      identity: { inBand: true },
      authenticate: ({ token }) => ({ user: token === 'tab-token' ? 'alice' : 'nobody' }),
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const { open } = sharedConnection(url);
    let asked = 0;
    const tab = open({ getToken: () => (asked++, Promise.resolve('tab-token')) });
    expect(await tab.call('whoami')).toBe('alice');
    expect(asked).toBeGreaterThan(0);
  });

  it('state$, notifications and subscription status reach every tab', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { open } = sharedConnection(url);
    const a = open();
    const b = open();
    await Promise.all([a.opened(), b.opened()]);
    expect([a.state, b.state, a.shared]).toEqual(['open', 'open', true]);
    const notes: unknown[] = [];
    a.notificationsOf('hello').subscribe((p) => notes.push(['a', p]));
    b.notificationsOf('hello').subscribe((p) => notes.push(['b', p]));
    onlySession(gateway).notify('hello', { x: 1 });
    await waitFor(() => notes.length === 2, 'both tabs');
    expect(notes.sort()).toEqual([
      ['a', { x: 1 }],
      ['b', { x: 1 }],
    ]);

    const seen: string[] = [];
    const watching = b.subscriptionStatus$('news').subscribe((s) => seen.push(s.state));
    await waitFor(() => seen.length === 1, 'the status now'); // ports are not ordered between tabs
    const sub = a.subscribe('news').subscribe();
    await waitFor(() => seen.includes('subscribed'), 'subscribed');
    sub.unsubscribe();
    await waitFor(() => seen.at(-1) === 'closed', 'closed');
    expect(seen).toEqual(['closed', 'connecting', 'subscribed', 'closed']);
    watching.unsubscribe();

    await a.close();
    expect(a.state).toBe('closed');
    await expect(a.call('x')).rejects.toThrow('Client closed');
    expect(b.state).toBe('open');
  });
});

describe('sharing, as a model: the gateway holds a topic while any tab observes it', () => {
  it('subscribes, unsubscribes and closing tabs in any order', async () => {
    const { gateway, url } = await res.gateway();
    const topics = ['t0', 't1'];
    for (const topic of topics) gateway.topic(topic);
    // A round trip through a tab's port, the worker's client and the gateway: what the tab
    // posted before it (a subscribe, an unsubscribe) has reached the gateway once it is answered.
    gateway.method('barrier', () => true);
    const { open } = sharedConnection(url);
    type Step = { kind: 'sub' | 'unsub' | 'close'; tab: number; topic: number };
    const step = fc.record({
      kind: fc.constantFrom<Step['kind']>('sub', 'sub', 'sub', 'unsub', 'close'),
      tab: fc.integer({ min: 0, max: 2 }),
      topic: fc.integer({ min: 0, max: 1 }),
    });
    /** One observer: what it received, and its unsubscribe. */
    type Observer = { got: unknown[]; unsubscribe: () => void };
    let published = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const slots: (SharedRpcClient | undefined)[] = [];
        /** Per tab, per topic: its observers. */
        const held: Observer[][][] = [];
        const tabAt = (i: number): SharedRpcClient => (slots[i] ??= open());
        try {
          for (const { kind, tab, topic } of steps) {
            const mine = ((held[tab] ??= [])[topic] ??= []);
            if (kind === 'close') {
              await slots[tab]?.close();
              slots[tab] = undefined;
              held[tab] = [];
            } else if (kind === 'sub') {
              const got: unknown[] = [];
              const s = tabAt(tab)
                .subscribe(topics[topic]!)
                .subscribe((m) => got.push(m));
              mine.push({ got, unsubscribe: () => s.unsubscribe() });
            } else mine.pop()?.unsubscribe();
            await slots[tab]?.call('barrier');
            for (const [t, name] of topics.entries()) {
              const observers = held.flatMap((perTab) => perTab[t] ?? []);
              const expected = observers.length > 0 ? 1 : 0;
              await waitFor(
                () => subscriptions(gateway, name) === expected,
                () => `${name}: ${subscriptions(gateway, name)} on the gateway, model ${expected}`,
                5_000,
              );
              if (expected === 0) continue;
              // Held, the topic reaches every observer: none was left behind by another's leaving.
              const message = ++published;
              await gateway.publish(name, message);
              await waitFor(
                () => observers.every((o) => o.got.includes(message)),
                () => `${name}: message ${message} to all ${observers.length} observers`,
                5_000,
              );
            }
          }
        } finally {
          // Every run starts with no tab, whatever the one before did (a failed run, shrinking).
          for (const tab of slots) await tab?.close();
          await waitFor(() => gateway.sessions.size === 0, 'every session to end', 5_000);
        }
      }),
      {
        numRuns: 15,
        examples: [
          // Two observers of a topic in one tab and one in another: each leaving while others
          // remain must leave the topic held for them.
          [
            [
              { kind: 'sub', tab: 0, topic: 0 },
              { kind: 'sub', tab: 0, topic: 0 },
              { kind: 'sub', tab: 1, topic: 0 },
              { kind: 'unsub', tab: 0, topic: 0 },
              { kind: 'close', tab: 1, topic: 0 },
              { kind: 'unsub', tab: 0, topic: 0 },
            ],
          ],
        ],
      },
    );
  }, 120_000);
});

describe('the rest of the client surface through the worker', () => {
  it('batch: one settled result per entry, errors with their class, notifications included', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    gateway.method('refuse', () => {
      throw new JsonRpcError(4001, 'no', { why: 'batch' });
    });
    const noted: unknown[] = [];
    gateway.method('note', (params) => void noted.push(params));
    const { open } = sharedConnection(url);
    const tab = open();
    await tab.opened();
    const results = await tab.batch([
      { method: 'add', params: [1, 2] },
      { method: 'note', params: ['hi'], notification: true },
      { method: 'refuse' },
      { method: 'add', params: [3, 4] },
    ]);
    expect(results.length).toBe(4);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 3 });
    expect(results[1]).toEqual({ status: 'fulfilled', value: undefined });
    expect(results[2]!.status).toBe('rejected');
    const reason = (results[2] as PromiseRejectedResult).reason as unknown;
    expect(reason).toBeInstanceOf(JsonRpcError);
    expect(reason).toMatchObject({ code: 4001, data: { why: 'batch' } });
    expect(results[3]).toEqual({ status: 'fulfilled', value: 7 });
    await waitFor(() => noted.length === 1, 'the notification');
    expect(noted).toEqual([['hi']]);

    const aborted = new AbortController();
    aborted.abort();
    expect(
      await rejectionOf(tab.batch([{ method: 'add', params: [1, 1] }], aborted)),
    ).toBeInstanceOf(CancelledError);
    await tab.close();
    expect(await rejectionOf(tab.batch([{ method: 'add', params: [1, 1] }]))).toBeInstanceOf(
      NotConnectedError,
    );
  });

  it("history: a page of the topic's retained messages, read by the worker's client", async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    for (let n = 1; n <= 3; n++) await gateway.publish('news', { n });
    const { open } = sharedConnection(url);
    const tab = open();
    const page = await tab.history<{ n: number }>('news', { last: 2 });
    expect(page.messages).toEqual([
      { seq: 2, data: { n: 2 } },
      { seq: 3, data: { n: 3 } },
    ]);
    expect(page.lastSeq).toBe(3);
    const unknown = await rejectionOf(tab.history('nope'));
    expect(unknown).toBeInstanceOf(JsonRpcError);
    expect(unknown).toMatchObject({ code: -32602, message: 'Unknown topic' });
  });

  it('authenticate: a new token for the one session every tab shares; refusals as AuthenticationError', async () => {
    const { gateway, url } = await res.gateway<{ user: string; level: string }>({
      identity: { inBand: true },
      userOf: (context) => context.user,
      authenticate: ({ token }) => {
        const [user, level] = (token ?? '').split(':');
        if (!user || !level) throw new Error('bad token');
        return { user, level };
      },
    });
    gateway.method('level', (_params, ctx) => ctx.session.context.level);
    const { open } = sharedConnection(url);
    const a = open({ getToken: () => 'alice:basic' });
    const b = open();
    expect(await b.call('level')).toBe('basic');
    const result = await a.authenticate('alice:admin');
    expect(result).toMatchObject({ user: 'alice' });
    expect(result.sessionId).toBe([...gateway.sessions.values()][0]!.id);
    expect(await b.call('level')).toBe('admin');
    // Without a token: the worker's getToken, which is tab a's.
    expect(await b.authenticate()).toMatchObject({ user: 'alice' });
    expect(await b.call('level')).toBe('basic');

    const changed = await rejectionOf(b.authenticate('bob:admin'));
    expect(changed).toBeInstanceOf(AuthenticationError);
    expect(changed).toMatchObject({ code: -32010, reason: 'user-changed' });
    expect(await a.call('level')).toBe('basic');
    expect(gateway.sessions.size).toBe(1);
  });

  it('a stray message is ignored, and a stream id a tab uses again does not outlive the tab', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const { openFull, open } = sharedConnection(url);
    const { tab: a, port } = openFull();
    const b = open();
    await Promise.all([a.opened(), b.opened()]);
    port.postMessage(null);
    const sub = { t: 'sub', id: 1_000_000, topic: 'news', params: undefined };
    port.postMessage(sub);
    port.postMessage(sub);
    await waitFor(() => subscriptions(gateway, 'news') === 1, 'the subscription');
    expect(await b.call('add', [20, 22])).toBe(42);
    await a.close();
    await waitFor(() => subscriptions(gateway, 'news') === 0, 'the tab to release it');
    expect(gateway.sessions.size).toBe(1); // b still holds the connection
  });

  it('a call id a tab uses again gives the first call up (the gateway sees it cancelled)', async () => {
    const { gateway, url } = await res.gateway();
    const signals: AbortSignal[] = [];
    gateway.method('hang', (_params, ctx) => {
      signals.push(ctx.signal);
      return new Promise(() => undefined);
    });
    const { openFull } = sharedConnection(url);
    const { tab, port } = openFull();
    await tab.opened();
    const call = { t: 'call', id: 2_000_000, method: 'hang', params: undefined };
    port.postMessage(call);
    await waitFor(() => signals.length === 1, 'the first call');
    port.postMessage(call);
    await waitFor(() => signals.length === 2, 'the second call');
    await waitFor(() => signals[0]!.aborted, 'the first call cancelled');
    expect(signals[1]!.aborted).toBe(false);
  });

  it('authenticate without a token where no getToken is anywhere: a TypeError, as from a client', async () => {
    const { url } = await res.gateway();
    const { open } = sharedConnection(url);
    const tab = open();
    const err = await rejectionOf(tab.authenticate());
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toMatch(/needs a token/);
  });

  it("presence: the topic's members, over one $presence subscription for every tab", async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('room.*', { presence: true });
    const { open } = sharedConnection(url);
    const [a, b] = [open(), open()];
    const seenA: number[] = [];
    const seenB: number[] = [];
    a.presence('room.1').subscribe((state) => seenA.push(state.count));
    b.presence('room.1').subscribe((state) => seenB.push(state.count));
    await waitFor(() => seenA.length > 0 && seenB.length > 0, 'the first states');
    expect(gateway.pubsub.subscriptionCount(onlySession(gateway))).toBe(1);

    const other = res.client(url);
    const member = other.subscribe('room.1').subscribe();
    await waitFor(() => seenA.at(-1) === 1 && seenB.at(-1) === 1, 'the member in both tabs');
    member.unsubscribe();
    await waitFor(() => seenA.at(-1) === 0 && seenB.at(-1) === 0, 'the member gone in both');
  });

  it('joined$: every observing tab hears of a join, reads its messages, and sees it end', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('room.*');
    const { open } = sharedConnection(url);
    const [a, b] = [open(), open()];
    const got: Record<string, unknown[]> = { a: [], b: [] };
    const ended: string[] = [];
    for (const [name, tab] of [
      ['a', a],
      ['b', b],
    ] as const) {
      tab.joined$.subscribe(({ topic, subscription }) => {
        got[name]!.push(topic);
        subscription.subscribe({
          next: (event) => got[name]!.push(event.data),
          complete: () => ended.push(name),
        });
      });
    }
    await Promise.all([a.opened(), b.opened()]);
    // Each tab's joins stream is open in the worker once a call posted after it is answered.
    await Promise.all([a.call('rpc.ping'), b.call('rpc.ping')]);
    const session = onlySession(gateway);
    await session.join('room.1');
    await waitFor(() => got['a']!.length === 1 && got['b']!.length === 1, 'the announcements');
    // Each tab's message stream is attached once a round trip on its port is back.
    await Promise.all([a.call('rpc.ping'), b.call('rpc.ping')]);
    await gateway.publish('room.1', 'hello');
    await waitFor(() => got['a']!.length === 2 && got['b']!.length === 2, 'the message');
    expect(got).toEqual({ a: ['room.1', 'hello'], b: ['room.1', 'hello'] });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);

    expect(session.leave('room.1')).toBe(true);
    await waitFor(() => ended.length === 2, 'both to see it end');
    expect(ended.sort()).toEqual(['a', 'b']);
  });

  it('inboxGaps$: the count lost past retention reaches the tab; without an inbox it completes', async () => {
    const gate = { admit: Promise.resolve() };
    const { gateway, url } = await res.gateway<{ user: string | undefined }>({
      authenticate: async ({ query }) => {
        await gate.admit;
        return { user: query.get('user') ?? undefined };
      },
      userOf: (context) => context.user,
      userInbox: { maxLength: 3 },
    });
    const { open } = sharedConnection(`${url}?user=bob`);
    const tab = open({ inbox: true });
    const events: unknown[] = [];
    tab.notificationsOf('msg').subscribe((params) => events.push(params));
    tab.inboxGaps$.subscribe((gap) => events.push(gap));
    await tab.opened();
    await waitFor(() => gateway.pubsub.topics()['~inbox.bob'] === 1, 'the inbox subscription');
    await gateway.notifyUser('bob', 'msg', [1]);
    await waitFor(() => events.length === 1, 'the first message');

    const stayOut = deferred();
    gate.admit = stayOut.promise;
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await waitFor(() => gateway.sessions.size === 0, 'the session to close');
    // Seven while away; history keeps the last three (6, 7, 8): 2 to 5 are lost.
    for (let i = 2; i <= 8; i++) await gateway.notifyUser('bob', 'msg', [i]);
    stayOut.resolve();
    await waitFor(() => events.length >= 5, 'the gap signal and the retained three');
    await tab.call('rpc.ping');
    expect(events).toEqual([[1], { gap: 4 }, [6], [7], [8]]);

    const plain = sharedConnection(url).open();
    let completed = false;
    plain.inboxGaps$.subscribe({ complete: () => (completed = true) });
    await waitFor(() => completed, 'inboxGaps$ to complete without an inbox');
  });

  it('a worker that fails before it answered hands what the tab posted to the fallback, once', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    vi.stubGlobal('WebSocket', WebSocket);
    // The fallback's channel, counting what the tab posts on it: a loop posting without end
    // throws here rather than hang the run.
    vi.stubGlobal(
      'MessageChannel',
      class CountedChannel extends MessageChannel {
        constructor() {
          super();
          const post = this.port1.postMessage.bind(this.port1);
          let count = 0;
          this.port1.postMessage = (message: unknown) => {
            if (++count > 1_000) throw new Error('the tab posts without end');
            post(message);
          };
        }
      },
    );
    try {
      // A worker whose script is broken: its port takes messages and never answers, then its
      // error event fires.
      let failed = (): void => undefined;
      const worker = () => ({
        port: { postMessage: () => undefined, close: () => undefined } as unknown as MessagePort,
        addEventListener: (_type: 'error', listener: () => void) => (failed = listener),
      });
      const tab = createSharedClient({ url, worker });
      shared.track(tab);
      const news: unknown[] = [];
      tab.subscribe('news').subscribe((m) => news.push(m));
      const sum = tab.call('add', [2, 3]);
      failed();
      expect(tab.shared).toBe(false);
      expect(await sum).toBe(5);
      await waitFor(() => subscriptions(gateway, 'news') === 1, 'the subscription');
      await gateway.publish('news', 'one');
      await waitFor(() => news.length === 1, 'the message');
      expect(news).toEqual(['one']);
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('on the fallback, a tab closed before its own client is loaded never dials (only the next tab does)', async () => {
    const { url } = await res.gateway();
    let dials = 0;
    class CountedWebSocket extends WebSocket {
      constructor(...args: ConstructorParameters<typeof WebSocket>) {
        super(...args);
        dials++;
      }
    }
    vi.stubGlobal('WebSocket', CountedWebSocket);
    try {
      // As StrictMode's effect, made and cleaned up at once, would.
      const tab = createSharedClient({ url, workerUrl: 'http://127.0.0.1/shared-worker.js' });
      expect(tab.shared).toBe(false);
      await tab.close();
      // A second tab, made after it, loads the same module and reads what it posted after
      // what the first one posted: once it is open, the first tab's hello was read too.
      const next = createSharedClient({ url, workerUrl: 'http://127.0.0.1/shared-worker.js' });
      shared.track(next);
      await next.opened();
      expect(dials).toBe(1);
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('on the fallback (no SharedWorker), the tab runs its own client with the same surface', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    await gateway.publish('news', 'one');
    vi.stubGlobal('WebSocket', WebSocket);
    try {
      const tab = createSharedClient({ url, workerUrl: 'http://127.0.0.1/shared-worker.js' });
      shared.track(tab);
      await tab.opened();
      expect(tab.shared).toBe(false);
      expect(await tab.batch([{ method: 'add', params: [2, 3] }])).toEqual([
        { status: 'fulfilled', value: 5 },
      ]);
      expect((await tab.history('news')).messages).toEqual([{ seq: 1, data: 'one' }]);
      let completed = false;
      tab.inboxGaps$.subscribe({ complete: () => (completed = true) });
      await waitFor(() => completed, 'inboxGaps$ to complete without an inbox');
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
