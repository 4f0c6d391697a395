/**
 * What one tab can make the shared worker hold is bounded: its open streams
 * (`maxStreamsPerTab`), its calls in flight (`maxCallsPerTab`, a batch one per request), the
 * methods it has handlers for (`maxHandlersPerTab`) and the server's calls it has running
 * (`maxRunsPerTab`; a call the server gives up on is over at once). Over a bound the tab's
 * request gets a precise error back over its port; other tabs are not touched; an id a tab uses
 * again replaces what it named. Driven as
 * shared-connection.test.ts drives it: the host over Node MessageChannel ports, against a real
 * gateway; here also by a raw tab that posts the port protocol itself.
 */
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CancelledError,
  JsonRpcError,
  NotConnectedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../src/client/index.js';
import { createClientHost, createSharedClient } from '../../src/client/shared/index.js';
import type {
  ClientHost,
  ClientHostOptions,
  SharedClientOptions,
} from '../../src/client/shared/index.js';
import type { HostMessage, SentBatchEntry, TabMessage } from '../../src/client/shared/messages.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Logger } from '../../src/peer/logger.js';
import { silentLogger } from '../../src/peer/logger.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';
import { freePort } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor, waitUntil, within } from '../support/waiting.js';
import { SHARED_PROTOCOL_VERSION, sentParams } from '../../src/client/shared/messages.js';

const res = new Resources();
const shared = new SharedTabs();
const ports: MessagePort[] = [];
afterEach(async () => {
  for (const port of ports.splice(0)) port.close();
  await shared.cleanup();
  await res.cleanup();
});

const makeHost = (options: ClientHostOptions): ClientHost => shared.host(options);

/** A tab made with createSharedClient whose worker is `host`. */
const openTab = (host: ClientHost, url: string, extra: Partial<SharedClientOptions> = {}) =>
  shared.tab(host, url, extra).tab;

/**
 * A tab that posts the port protocol itself, and what the worker posted it; with `token`, it
 * says it has a getToken (it answers the worker's `rpc.token` runs only when the test does).
 */
function rawTab(host: ClientHost, url: string, token = false) {
  const channel = new MessageChannel();
  ports.push(channel.port1);
  const got: HostMessage[] = [];
  const watchers = new Set<() => void>();
  channel.port1.onmessage = (event: MessageEvent) => {
    const message = event.data as HostMessage;
    if (message.t === 'ping') channel.port1.postMessage({ t: 'pong' } satisfies TabMessage);
    got.push(message);
    for (const watcher of [...watchers]) watcher();
  };
  host.connect(channel.port2);
  const send = (message: TabMessage): void => channel.port1.postMessage(message);
  /** The first message from `from` on that `match` takes. */
  const next = (match: (m: HostMessage) => boolean, from = 0): Promise<HostMessage> =>
    within(
      new Promise<HostMessage>((resolve) => {
        const look = (): void => {
          const found = got.slice(from).find(match);
          if (!found) return;
          watchers.delete(look);
          resolve(found);
        };
        watchers.add(look);
        look();
      }),
      `a message from the worker (${String(match)}; got ${JSON.stringify(got.slice(from).slice(-5))})`,
    );
  /** Every message posted before this resolves has been read (a port keeps its order). */
  let barriers = 1_000_000;
  const barrier = async (): Promise<void> => {
    const id = ++barriers;
    // A joined subscription that never was: answered `end` at once, holding nothing.
    send({ t: 'jsub', id, jid: -1 });
    await next((m) => m.t === 'end' && m.id === id);
  };
  send({ t: 'hello', v: SHARED_PROTOCOL_VERSION, options: { url: [url] }, token });
  return { got, send, next, barrier };
}

const idOf = (m: HostMessage): number | undefined => ('id' in m ? m.id : undefined);

/** The gateway's subscriptions to the topics named. */
const subscribed = (gateway: Gateway, topics: readonly string[]): number => {
  const all = gateway.pubsub.topics();
  return topics.reduce((sum, topic) => sum + (all[topic] ?? 0), 0);
};

/** A gateway method `hold` that runs until released by id or cancelled, counting those running. */
function holding(gateway: Gateway) {
  const releases = new Map<number, Set<() => void>>();
  const state = { running: 0 };
  /** Every id a call of `hold` ran with. */
  const started = new Set<number>();
  gateway.method('hold', async ([id]: [number], ctx) => {
    state.running++;
    started.add(id);
    const released = deferred();
    const resolve = (): void => released.resolve();
    const set = releases.get(id) ?? new Set();
    releases.set(id, set);
    set.add(resolve);
    try {
      await Promise.race([released.promise, untilAborted(ctx.signal)]);
      return id;
    } finally {
      set.delete(resolve);
      state.running--;
    }
  });
  const release = (id: number): void => {
    for (const resolve of releases.get(id) ?? []) resolve();
  };
  /** Whether a call of `id` is running. */
  const holds = (id: number): boolean => (releases.get(id)?.size ?? 0) > 0;
  return { state, release, holds, started };
}

/** The gateway's session of the one connection there is (the worker's). */
const onlySession = (gateway: Gateway) => {
  const sessions = [...gateway.sessions.values()];
  expect(sessions).toHaveLength(1);
  return sessions[0]!;
};

type RunMessage = Extract<HostMessage, { t: 'run' }>;

describe('createClientHost bounds options', () => {
  it.each([
    [{ maxStreamsPerTab: 0 }, RangeError, 'maxStreamsPerTab must be an integer at least 1, not 0'],
    [{ maxStreamsPerTab: 1.5 }, RangeError, 'maxStreamsPerTab must be an integer at least 1'],
    [{ maxCallsPerTab: -1 }, RangeError, 'maxCallsPerTab must be an integer at least 1, not -1'],
    [{ maxCallsPerTab: '10' }, TypeError, 'maxCallsPerTab must be an integer at least 1, not "10"'],
    [{ maxHandlersPerTab: 0 }, RangeError, 'maxHandlersPerTab must be an integer at least 1'],
    [{ maxHandlersPerTab: NaN }, TypeError, 'maxHandlersPerTab must be an integer at least 1'],
    [{ maxQueuedPerTab: 0 }, RangeError, 'maxQueuedPerTab must be an integer at least 1, not 0'],
    [{ tabHeartbeatMs: 0 }, RangeError, 'tabHeartbeatMs must be an integer from 1 to 2147483647'],
    [
      { maxStreamPerTab: 5 },
      TypeError,
      'maxStreamPerTab is not an option of createClientHost (did you mean maxStreamsPerTab?)',
    ],
    [{ maxPendingCalls: 0 }, RangeError, 'maxPendingCalls must be an integer at least 1, not 0'],
  ])('%j is refused where the host is made', (options, type, message) => {
    const make = () => createClientHost(options as ClientHostOptions);
    expect(make).toThrow(type);
    expect(make).toThrow(message);
  });
});

describe("a tab's hello, checked again in the worker", () => {
  // A port takes anything: a script posting its own hello skips the tab's check.
  it.each([
    [null, 'options must be an object, not null'],
    [{ tabHeartbeatMs: 0 }, 'tabHeartbeatMs must be an integer from 1 to 2147483647, not 0'],
    [{ tabHeartbeatMs: 1e12 }, 'tabHeartbeatMs must be an integer from 1 to 2147483647'],
    [{ tabHeartbeatMs: 'abc' }, 'tabHeartbeatMs must be an integer from 1 to 2147483647'],
  ])('options %j: fail naming the option, no client made', async (options, message) => {
    const host = makeHost({});
    const channel = new MessageChannel();
    ports.push(channel.port1);
    const got: HostMessage[] = [];
    channel.port1.onmessage = (event) => got.push(event.data as HostMessage);
    host.connect(channel.port2);
    channel.port1.postMessage({ t: 'hello', v: SHARED_PROTOCOL_VERSION, options, token: false });
    await waitFor(() => got.length > 0, 'an answer to the hello');
    expect(got[0]).toMatchObject({
      t: 'fail',
      error: { message: expect.stringContaining(message) },
    });
    expect(host.tabs).toBe(0);
  });
});

describe('per-tab bounds of the shared worker', () => {
  it('a tab past maxStreamsPerTab gets -32005 on the stream it opened; other tabs are not touched', async () => {
    const { gateway, url } = await res.gateway();
    const topics = ['a', 'b', 'c', 'd'];
    for (const topic of topics) gateway.topic(topic);
    const host = makeHost({ maxStreamsPerTab: 2 });
    const greedy = openTab(host, url);
    const other = openTab(host, url);
    await Promise.all([greedy.opened(), other.opened()]);

    const first = greedy.subscribe('a').subscribe();
    greedy.subscriptionStatus$('b').subscribe();
    const refused = await rejectionOf(
      new Promise((resolve, reject) =>
        greedy.subscribe('c').subscribe({ error: reject, complete: () => resolve(undefined) }),
      ),
    );
    expect(refused).toBeInstanceOf(JsonRpcError);
    expect(refused).toMatchObject({
      code: -32005,
      message:
        'Too many streams open in this tab: at most 2 (maxStreamsPerTab of the shared worker)',
      data: { limit: 2 },
    });
    await waitFor(() => subscribed(gateway, ['a']) === 1, "the first tab's subscription");
    expect(subscribed(gateway, ['c'])).toBe(0);

    // The other tab's streams count on their own.
    other.subscribe('c').subscribe();
    other.subscribe('d').subscribe();
    await waitFor(() => subscribed(gateway, ['c', 'd']) === 2, "the other tab's two subscriptions");

    // A stream closed makes room for one more.
    first.unsubscribe();
    await waitFor(() => subscribed(gateway, ['a']) === 0, 'the first subscription to end');
    const got: unknown[] = [];
    greedy.subscribe('a').subscribe({ next: (m) => got.push(m), error: (e) => got.push(e) });
    await waitFor(() => subscribed(gateway, ['a']) === 1, 'the subscription made again');
    await gateway.publish('a', 'hello');
    await waitFor(() => got.length === 1, 'the message');
    expect(got).toEqual(['hello']);
  });

  it('a tab past maxCallsPerTab gets TooManyPendingCallsError; settled calls make room; other tabs call on', async () => {
    const { gateway, url } = await res.gateway();
    const { state, release } = holding(gateway);
    const host = makeHost({ maxCallsPerTab: 2 });
    const greedy = openTab(host, url);
    const other = openTab(host, url);
    await Promise.all([greedy.opened(), other.opened()]);

    const one = greedy.call('hold', [1]);
    const two = greedy.history('nowhere').catch(() => undefined);
    const three = await rejectionOf(greedy.call('hold', [3]));
    expect(three).toBeInstanceOf(TooManyPendingCallsError);
    expect(three).toMatchObject({ limit: 2 });
    const batch = await greedy.batch([{ method: 'hold', params: [4] }]).catch((e: unknown) => e);
    expect(batch).toBeInstanceOf(TooManyPendingCallsError);

    const others = other.call('hold', [5]);
    await waitFor(() => state.running === 2, "the other tab's call to run beside the first's");
    release(5);
    expect(await others).toBe(5);

    release(1);
    expect(await one).toBe(1);
    await two;
    const again = greedy.call('hold', [6]);
    await waitFor(() => state.running === 1, 'the call made once there was room');
    release(6);
    expect(await again).toBe(6);
  });

  it('maxCallsPerTab is half the client’s maxPendingCalls unless given', async () => {
    const { gateway, url } = await res.gateway();
    const { state, release } = holding(gateway);
    const host = makeHost({ maxPendingCalls: 5 });
    const tab = openTab(host, url);
    await tab.opened();
    const held = [1, 2, 3].map((id) => tab.call('hold', [id]));
    const refused = await rejectionOf(tab.call('hold', [4]));
    expect(refused).toBeInstanceOf(TooManyPendingCallsError);
    expect(refused).toMatchObject({ limit: 3 });
    await waitFor(() => state.running === 3, 'the three calls');
    for (const id of [1, 2, 3]) release(id);
    expect(await Promise.all(held)).toEqual([1, 2, 3]);
  });

  it('on the fallback (no SharedWorker) the lone tab’s calls are bounded by maxPendingCalls, not half of it', async () => {
    const { gateway, url } = await res.gateway();
    const { state, release } = holding(gateway);
    vi.stubGlobal('WebSocket', WebSocket);
    try {
      const tab = createSharedClient({
        url,
        workerUrl: 'http://127.0.0.1/shared-worker.js',
        maxPendingCalls: 4,
      });
      shared.track(tab);
      await tab.opened();
      expect(tab.shared).toBe(false);
      const held = [1, 2, 3, 4].map((id) => tab.call('hold', [id]));
      await waitFor(() => state.running === 4, 'all four calls running');
      const refused = await rejectionOf(tab.call('hold', [5]));
      expect(refused).toBeInstanceOf(TooManyPendingCallsError);
      expect(refused).toMatchObject({ limit: 4 });
      for (const id of [1, 2, 3, 4]) release(id);
      expect(await Promise.all(held)).toEqual([1, 2, 3, 4]);
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('a register past maxHandlersPerTab is not taken, and the tab logs why; an unregister makes room', async () => {
    const { gateway, url } = await res.gateway();
    const host = makeHost({ maxHandlersPerTab: 2 });
    const logged: { obj: unknown; msg: string | undefined }[] = [];
    const logger: Logger = {
      ...silentLogger,
      error: (obj: unknown, msg?: string) => void logged.push({ obj, msg }),
      child: () => logger,
    };
    const tab = openTab(host, url, { logger });
    await tab.opened();
    const removeA = tab.method('a', () => 'a');
    tab.method('b', () => 'b');
    const removeC = tab.method('c', () => 'c');
    await waitFor(() => logged.length === 1, 'the refusal to be logged');
    expect(logged[0]!.msg).toBe('the shared worker did not register this handler');
    const { err, method } = logged[0]!.obj as { err: unknown; method: string };
    expect(method).toBe('c');
    expect(err).toBeInstanceOf(RangeError);
    expect((err as Error).message).toBe(
      'Too many handlers in this tab: at most 2 (maxHandlersPerTab of the shared worker); "c" is not registered',
    );
    const registry = host.client!.registry;
    expect([registry.has('a'), registry.has('b'), registry.has('c')]).toEqual([true, true, false]);
    const session = [...gateway.sessions.values()][0]!;
    expect(await rejectionOf(session.call('c'))).toMatchObject({ code: -32601 });
    expect(await session.call('b')).toBe('b');

    // The tab keeps what it registered; registering it again once there is room reaches the worker.
    removeA();
    removeC();
    tab.method('c', () => 'c');
    await waitFor(() => registry.has('c'), 'c, once a made room');
    expect(registry.has('a')).toBe(false);
    expect(await session.call('c')).toBe('c');
    expect(logged).toHaveLength(1);
  });

  it('an id a tab uses again replaces what it named: no stream or call is left behind', async () => {
    const { gateway, url } = await res.gateway();
    for (const topic of ['news', 'sport']) gateway.topic(topic);
    const { state, release, holds } = holding(gateway);
    const host = makeHost({ maxStreamsPerTab: 1, maxCallsPerTab: 1 });
    const tab = rawTab(host, url);
    await tab.next((m) => m.t === 'state');

    // A stream id used again, at the bound: the new stream replaces the old one, not refused.
    tab.send({ t: 'sub', id: 5, topic: 'news', params: undefined });
    await waitFor(() => subscribed(gateway, ['news']) === 1, 'news');
    tab.send({ t: 'sub', id: 5, topic: 'sport', params: undefined });
    await waitFor(
      () => subscribed(gateway, ['news']) === 0 && subscribed(gateway, ['sport']) === 1,
      'sport instead of news',
    );
    // ... and by a joined subscription that has ended: the stream it named ends with it.
    tab.send({ t: 'jsub', id: 5, jid: 12345 });
    await tab.next((m) => m.t === 'end' && m.id === 5);
    await waitFor(() => subscribed(gateway, ['sport']) === 0, 'sport to end with its id');
    expect(tab.got.filter((m) => m.t === 'end' && m.error)).toEqual([]);

    // A call id used again, at the bound: the first call is cancelled, the second runs.
    tab.send({ t: 'call', id: 7, method: 'hold', params: sentParams([1]) });
    await waitFor(() => state.running === 1, 'the first call');
    tab.send({ t: 'call', id: 7, method: 'hold', params: sentParams([2]) });
    await tab.barrier();
    await waitFor(
      () => state.running === 1 && holds(2),
      'the first call cancelled, the second running',
    );
    release(2);
    const result = await tab.next((m) => m.t === 'result' && m.id === 7);
    expect(result).toEqual({ t: 'result', id: 7, result: 2 });
    await tab.barrier();
    expect(tab.got.filter((m) => idOf(m) === 7)).toHaveLength(1);
  });

  it('a batch takes one call slot per request: one that does not fit the tab’s share is refused whole, nothing of it sent; other tabs call on', async () => {
    const { gateway, url } = await res.gateway();
    const { state, release, started } = holding(gateway);
    // Two slots per tab (half of 4): a batch of 4 counted as one call would take every slot.
    const host = makeHost({ maxPendingCalls: 4 });
    const greedy = openTab(host, url);
    const other = openTab(host, url);
    await Promise.all([greedy.opened(), other.opened()]);

    const all = [1, 2, 3, 4].map((id) => ({ method: 'hold', params: [id] }));
    const refused = await within(rejectionOf(greedy.batch(all)), 'the batch of 4 refused');
    expect(refused).toBeInstanceOf(TooManyPendingCallsError);
    expect(refused).toMatchObject({ limit: 2 });

    // Its notifications take no slot: two requests and a notification fit the share.
    const fits = greedy.batch([
      { method: 'hold', params: [5] },
      { method: 'nothing', notification: true },
      { method: 'hold', params: [6] },
    ]);
    await waitFor(() => state.running === 2, 'the batch that fits');
    const over = await rejectionOf(greedy.call('hold', [7]));
    expect(over).toBeInstanceOf(TooManyPendingCallsError);
    expect(over).toMatchObject({ limit: 2 });

    // The other tab has its share: two calls beside the batch.
    const others = Promise.all([other.call('hold', [8]), other.call('hold', [9])]);
    await waitFor(() => state.running === 4, "the other tab's calls beside the batch");
    for (const id of [5, 6, 8, 9]) release(id);
    expect(await others).toEqual([8, 9]);
    expect(await fits).toEqual([
      { status: 'fulfilled', value: 5 },
      { status: 'fulfilled', value: undefined },
      { status: 'fulfilled', value: 6 },
    ]);
    expect([...started].sort()).toEqual([5, 6, 8, 9]);

    // Settled, the batch's slots are free again.
    const again = greedy.batch([1, 2].map((id) => ({ method: 'hold', params: [10 + id] })));
    await waitFor(() => state.running === 2, 'a batch of two again');
    release(11);
    release(12);
    expect((await again).map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
  });

  it('a server call given up on (rpc.cancel, its timeout) is over in the worker at once: the tab that never answers is told, and its run no longer counts', async () => {
    const { gateway, url } = await res.gateway();
    const host = makeHost({ maxRunsPerTab: 1 });
    const tab = rawTab(host, url); // never answers a run of its own accord
    await tab.next((m) => m.t === 'state');
    tab.send({ t: 'register', method: 'slow' });
    await waitFor(() => host.client?.registry.has('slow') === true, 'slow registered');
    const session = onlySession(gateway);
    const runs = (): RunMessage[] => tab.got.filter((m): m is RunMessage => m.t === 'run');

    // Cancelled by the server: rpc.cancel.
    const giveUp = new AbortController();
    const first = rejectionOf(session.call('slow', [1], { signal: giveUp.signal }));
    await waitFor(() => runs().length === 1, 'the first run');
    giveUp.abort();
    expect(await first).toBeInstanceOf(CancelledError);
    const [run1] = runs();
    await tab.next((m) => m.t === 'abort' && m.id === run1!.id);
    // What the tab answers after that is dropped.
    tab.send({ t: 'answer', id: run1!.id, result: 'late' });

    // Given up on when its timeout passed: the server sends rpc.cancel for it too.
    const second = rejectionOf(session.call('slow', [2], { timeoutMs: 50 }));
    await waitFor(() => runs().length === 2, 'the second run, in the one run slot');
    expect(await second).toBeInstanceOf(TimeoutError);
    await tab.next((m) => m.t === 'abort' && m.id === runs()[1]!.id);

    // The slot is free once more: the next call runs in the tab, which answers it.
    const third = session.call('slow', [3]);
    await waitFor(() => runs().length === 3, 'the third run');
    const run3 = runs()[2]!;
    expect(run3.params).toEqual([3]);
    tab.send({ t: 'answer', id: run3.id, result: 'three' });
    expect(await third).toBe('three');
  });

  it('a tab past maxRunsPerTab: the server’s next call goes to the next tab with the method, or gets -32000 when every one is full', async () => {
    const { gateway, url } = await res.gateway();
    const host = makeHost({ maxRunsPerTab: 1 });
    const first = rawTab(host, url);
    const second = rawTab(host, url);
    await Promise.all([first, second].map((t) => t.next((m) => m.t === 'state')));
    first.send({ t: 'register', method: 'm' });
    await first.barrier();
    second.send({ t: 'register', method: 'm' });
    await second.barrier();
    const session = onlySession(gateway);
    const run = (tab: typeof first, params: unknown): Promise<HostMessage> =>
      tab.next((m) => m.t === 'run' && JSON.stringify(m.params) === JSON.stringify(params));

    const one = session.call('m', [1]);
    const run1 = (await run(first, [1])) as RunMessage;
    const two = session.call('m', [2]);
    const run2 = (await run(second, [2])) as RunMessage;
    const busy = await rejectionOf(session.call('m', [3]));
    expect(busy).toMatchObject({
      code: -32000,
      message:
        'Server busy: every open tab with a handler for "m" has 1 calls running (maxRunsPerTab of the shared worker)',
      data: { limit: 1 },
    });

    // Answered, a run makes room in its tab: the first tab takes the next call again.
    first.send({ t: 'answer', id: run1.id, result: 'one' });
    expect(await one).toBe('one');
    const four = session.call('m', [4]);
    const run4 = (await run(first, [4])) as RunMessage;
    first.send({ t: 'answer', id: run4.id, result: 'four' });
    second.send({ t: 'answer', id: run2.id, result: 'two' });
    expect(await Promise.all([two, four])).toEqual(['two', 'four']);
    expect([first, second].flatMap((t) => t.got.filter((m) => m.t === 'run'))).toHaveLength(3);
  });

  it('a tab that never answers its runs cannot leave the server’s calls to other tabs’ handlers busy (default maxRunsPerTab: half the client’s 256)', async () => {
    const { gateway, url } = await res.gateway();
    const host = makeHost({});
    const bad = rawTab(host, url);
    const good = rawTab(host, url);
    await Promise.all([bad, good].map((t) => t.next((m) => m.t === 'state')));
    bad.send({ t: 'register', method: 'bad.method' });
    good.send({ t: 'register', method: 'good.method' });
    await Promise.all([bad.barrier(), good.barrier()]);
    const session = onlySession(gateway);
    const badRuns = (): number => bad.got.filter((m) => m.t === 'run').length;

    // As many calls as the worker's client runs at once, all given up on by the server.
    const giveUps = Array.from({ length: 256 }, () => new AbortController());
    const outcomes = giveUps.map((giveUp, n) =>
      rejectionOf(session.call('bad.method', [n], { signal: giveUp.signal })),
    );
    const refused: unknown[] = [];
    for (const outcome of outcomes) void outcome.then((err) => refused.push(err));
    await waitFor(() => badRuns() + refused.length === 256, 'every call run or refused');
    expect(badRuns()).toBe(128);
    expect(refused).toHaveLength(128);
    expect(refused[0]).toMatchObject({ code: -32000, data: { limit: 128 } });
    for (const giveUp of giveUps) giveUp.abort();
    await Promise.all(outcomes);
    await waitFor(() => bad.got.filter((m) => m.t === 'abort').length === 128, 'the aborts');

    const answer = session.call('good.method');
    const run = (await good.next((m) => m.t === 'run')) as RunMessage;
    good.send({ t: 'answer', id: run.id, result: 'good answer' });
    expect(await answer).toBe('good answer');
    // The runs given up on hold nothing: the bad tab takes the server's calls again.
    const giveUp = new AbortController();
    const more = rejectionOf(session.call('bad.method', ['more'], { signal: giveUp.signal }));
    await waitFor(() => badRuns() === 129, 'one more run in the bad tab');
    giveUp.abort();
    expect(await more).toBeInstanceOf(CancelledError);
  });

  it('model: whatever a tab opens, closes, calls, batches and settles, the worker holds at most the bounds and every refusal is answered', async () => {
    const { gateway, url } = await res.gateway();
    const ids = [1, 2, 3, 4];
    const topics = ids.map((id) => `t${id}`);
    for (const topic of topics) gateway.topic(topic);
    const { state, release, holds } = holding(gateway);
    const bounds = { maxStreamsPerTab: 2, maxCallsPerTab: 2 };
    const host = makeHost(bounds);
    // Keeps the client (and its session) between runs.
    const keeper = rawTab(host, url);
    await keeper.next((m) => m.t === 'state');

    const id = fc.constantFrom(...ids);
    // Opens and calls most often, so that runs reach the bounds.
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.record({ k: fc.constant('open' as const), id }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('close' as const), id }) },
      { weight: 3, arbitrary: fc.record({ k: fc.constant('call' as const), id }) },
      {
        weight: 2,
        // Its requests (a notification besides): one slot each; none, it is over at once.
        arbitrary: fc.record({
          k: fc.constant('batch' as const),
          id,
          requests: fc.integer({ min: 0, max: 3 }),
        }),
      },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('settle' as const), id }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('cancel' as const), id }) },
    );
    const refusals = { open: 0, call: 0, batch: 0 };
    const callId = (n: number): number => 100 + n;
    // Each request holds a key of its own at the gateway: a call that replaces another under
    // the same id is told apart from the one it replaced, whose cancel may still be on its way.
    let lastKey = 0;

    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 4, maxLength: 14 }), async (ops) => {
        const tab = rawTab(host, url);
        await tab.next((m) => m.t === 'state');
        const streams = new Set<number>();
        // The tab's calls and batches the worker holds, by id: the keys of their requests.
        const calls = new Map<number, number[]>();
        const slots = (): number => [...calls.values()].reduce((sum, k) => sum + k.length, 0);
        try {
          for (const o of ops) {
            const { k, id: n } = o;
            const from = tab.got.length;
            let refused: boolean | undefined;
            /** Answered at once, not held (a batch of notifications only). */
            let over = false;
            if (k === 'open') {
              refused = !streams.has(n) && streams.size >= bounds.maxStreamsPerTab;
              tab.send({ t: 'sub', id: n, topic: `t${n}`, params: undefined });
              if (!refused) streams.add(n);
            } else if (k === 'close') {
              tab.send({ t: 'unsub', id: n });
              streams.delete(n);
            } else if (o.k === 'call' || o.k === 'batch') {
              const keys = Array.from({ length: o.k === 'call' ? 1 : o.requests }, () => ++lastKey);
              // What the id named is given up, taken or not: its slots are free for this one.
              calls.delete(callId(n));
              refused = slots() + keys.length > bounds.maxCallsPerTab;
              if (o.k === 'call') {
                tab.send({ t: 'call', id: callId(n), method: 'hold', params: sentParams(keys) });
              } else {
                const entries: SentBatchEntry[] = keys.map((key) => ({
                  method: 'hold',
                  params: sentParams([key]),
                }));
                entries.push({ method: 'nothing', notification: true });
                tab.send({ t: 'batch', id: callId(n), entries });
              }
              over = !refused && keys.length === 0;
              if (over) await tab.next((m) => m.t === 'result' && m.id === callId(n), from);
              else if (!refused) calls.set(callId(n), keys);
            } else if (calls.has(callId(n))) {
              // Settled or cancelled: the worker has let go of it once the tab has the result.
              if (k === 'settle') for (const key of calls.get(callId(n))!) release(key);
              else tab.send({ t: 'cancel', id: callId(n) });
              await tab.next((m) => m.t === 'result' && m.id === callId(n), from);
              calls.delete(callId(n));
            }
            await tab.barrier();
            const answered = tab.got.slice(from).filter((m) => {
              if (k === 'open') return m.t === 'end' && m.id === n;
              return (k === 'call' || k === 'batch') && m.t === 'result' && m.id === callId(n);
            });
            if (refused === true) {
              refusals[k as 'open' | 'call' | 'batch']++;
              expect(answered).toHaveLength(1);
              const error = (answered[0] as { error?: unknown }).error;
              expect(error).toMatchObject(
                k === 'open'
                  ? { rpc: { code: -32005, data: { limit: bounds.maxStreamsPerTab } } }
                  : { name: 'TooManyPendingCallsError', fields: { limit: bounds.maxCallsPerTab } },
              );
            } else if (refused === false) {
              expect(answered).toHaveLength(over ? 1 : 0);
            }
            await waitUntil(
              () =>
                subscribed(gateway, topics) === streams.size &&
                state.running === slots() &&
                [...calls.values()].every((keys) => keys.every(holds)),
              `${streams.size} subscriptions and ${slots()} calls at the gateway`,
            );
            expect(streams.size).toBeLessThanOrEqual(bounds.maxStreamsPerTab);
            expect(slots()).toBeLessThanOrEqual(bounds.maxCallsPerTab);
          }
        } finally {
          tab.send({ t: 'bye' });
          await waitFor(
            () => subscribed(gateway, topics) === 0 && state.running === 0,
            'the tab let go of everything',
          );
        }
      }),
      {
        numRuns: 30,
        // One run past every bound whatever the random ones do: the third stream, then a batch
        // and a call once two calls hold both slots.
        examples: [
          [
            [
              { k: 'open', id: 1 },
              { k: 'open', id: 2 },
              { k: 'open', id: 3 },
              { k: 'call', id: 1 },
              { k: 'call', id: 2 },
              { k: 'batch', id: 3, requests: 1 },
              { k: 'call', id: 4 },
              { k: 'settle', id: 1 },
              { k: 'cancel', id: 2 },
            ],
          ],
        ],
      },
    );
    // The runs went past both bounds (else the property says little).
    expect(refusals.open).toBeGreaterThan(0);
    expect(refusals.call).toBeGreaterThan(0);
    expect(refusals.batch).toBeGreaterThan(0);
  });
});

describe('the worker asking its tabs for a token', () => {
  /** A gateway that takes any token in-band: the session's user is the token. */
  const tokenGateway = () =>
    res.gateway<{ user: string }>({
      identity: { inBand: true },
      authenticate: ({ token }) => ({ user: String(token) }),
      userOf: (context) => context.user,
    });
  const tokenRuns = (tab: { got: HostMessage[] }): RunMessage[] =>
    tab.got.filter((m): m is RunMessage => m.t === 'run' && m.method === 'rpc.token');
  /** The most token runs the tab had at once: posted to it and not yet aborted. */
  const mostAtOnce = (tab: { got: HostMessage[] }): number => {
    const open = new Set<number>();
    let most = 0;
    for (const m of tab.got) {
      if (m.t === 'run' && m.method === 'rpc.token') open.add(m.id);
      if (m.t === 'abort') open.delete(m.id);
      most = Math.max(most, open.size);
    }
    return most;
  };

  it('a getToken that has not answered holds one run in its tab: every token the worker wants meanwhile waits on that one', async () => {
    const { url } = await tokenGateway();
    const host = makeHost({});
    const tab = rawTab(host, url, true);
    await waitFor(() => tokenRuns(tab).length === 1, 'the dial asking the tab for a token');
    // authenticate() without a token, three times: each asks the worker's getToken.
    for (const id of [1, 2, 3]) tab.send({ t: 'auth', id });
    await tab.barrier();
    expect(tokenRuns(tab)).toHaveLength(1);

    tab.send({ t: 'answer', id: tokenRuns(tab)[0]!.id, result: 'ann' });
    for (const id of [1, 2, 3]) {
      expect(await tab.next((m) => m.t === 'result' && m.id === id)).toMatchObject({
        result: { user: 'ann' },
      });
    }
    expect(tokenRuns(tab)).toHaveLength(1);
  });

  it('a token no tab gives within connectTimeoutMs is given up on both sides: the tab is told, and the next request asks again, one run at a time', async () => {
    const { url } = await tokenGateway();
    const host = makeHost({ connectTimeoutMs: 100 });
    const tab = rawTab(host, url, true); // never answers its token runs
    await waitFor(() => tokenRuns(tab).length === 1, 'the first token run');
    tab.send({ t: 'auth', id: 1 });
    expect(await tab.next((m) => m.t === 'result' && m.id === 1)).toMatchObject({
      error: { name: 'TimeoutError', fields: { method: 'rpc.token', timeoutMs: 100 } },
    });
    await waitFor(() => tokenRuns(tab).length >= 3, 'the dials after it asking again');
    const runs = tokenRuns(tab);
    for (const run of runs.slice(0, -1)) {
      expect(tab.got.some((m) => m.t === 'abort' && m.id === run.id)).toBe(true);
    }
    expect(mostAtOnce(tab)).toBe(1);
  });

  it('a tab whose getToken did not answer in time is asked after the other tabs', async () => {
    const { gateway, url } = await tokenGateway();
    const host = makeHost({ connectTimeoutMs: 200 });
    const silent = rawTab(host, url, true);
    await waitFor(() => tokenRuns(silent).length === 1, 'the first tab asked');
    const answering = rawTab(host, url, true);
    const answered = new Set<number>();
    await waitFor(() => {
      for (const run of tokenRuns(answering)) {
        if (answered.has(run.id)) continue;
        answered.add(run.id);
        answering.send({ t: 'answer', id: run.id, result: 'bob' });
      }
      return [...gateway.sessions.values()].some((session) => session.user === 'bob');
    }, 'a session with the second tab’s token');
    for (const run of tokenRuns(silent)) {
      expect(silent.got.some((m) => m.t === 'abort' && m.id === run.id)).toBe(true);
    }
    expect(mostAtOnce(silent)).toBe(1);
  });

  it('the worker’s client closing gives up the token it was asking for: the tab is told', async () => {
    const { url } = await tokenGateway();
    const host = makeHost({});
    const tab = rawTab(host, url, true);
    await waitFor(() => tokenRuns(tab).length === 1, 'the dial asking the tab for a token');
    await host.close();
    const [run] = tokenRuns(tab);
    await tab.next((m) => m.t === 'abort' && m.id === run!.id);
  });

  it('a token run the worker gave up on is over in the tab too: what its getToken gives later is not posted', async () => {
    const { gateway, url } = await tokenGateway();
    gateway.method('whoami', (_params, ctx) => ctx.session.user);
    const host = makeHost({ connectTimeoutMs: 100 });
    const heard: HostMessage[] = [];
    const posted: TabMessage[] = [];
    const first = deferred<string>();
    let asked = 0;
    const { tab } = shared.tab(
      host,
      url,
      // The first token comes only once the worker has given up on it; the next ones at once.
      { getToken: () => (asked++ === 0 ? first.promise : 'ann') },
      (port) => new RecordingPort(port, heard, posted) as unknown as MessagePort,
    );
    expect(await tab.call('whoami')).toBe('ann');
    const run1 = heard.find((m): m is RunMessage => m.t === 'run' && m.method === 'rpc.token')!;
    expect(heard.some((m) => m.t === 'abort' && m.id === run1.id)).toBe(true);
    first.resolve('late');
    await first.promise;
    expect(await tab.call('whoami')).toBe('ann'); // a round trip after the late token
    expect(posted.filter((m) => m.t === 'answer' && m.id === run1.id)).toEqual([]);
  });
});

/** A tab's end of its channel that keeps what crosses it each way. */
class RecordingPort {
  #listener: ((event: MessageEvent) => void) | null = null;
  constructor(
    readonly inner: MessagePort,
    readonly heard: HostMessage[],
    readonly posted: TabMessage[],
  ) {}
  set onmessage(listener: ((event: MessageEvent) => void) | null) {
    this.#listener = listener;
    this.inner.onmessage =
      listener &&
      ((event: MessageEvent) => {
        this.heard.push(event.data as HostMessage);
        listener(event);
      });
  }
  get onmessage(): ((event: MessageEvent) => void) | null {
    return this.#listener;
  }
  postMessage(message: TabMessage): void {
    this.posted.push(message);
    this.inner.postMessage(message);
  }
  close(): void {
    this.inner.close();
  }
  addEventListener(): void {}
}

/** A logger that keeps what the worker's client warns of. */
function warnings() {
  const warned: { obj: unknown; msg: string | undefined }[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (obj: unknown, msg?: string) => void warned.push({ obj, msg }),
    child: () => logger,
  };
  /** The messages of the errors logged with each dropped notification. */
  const dropped = (): string[] =>
    warned
      .filter((w) => w.msg === 'queued notification dropped')
      .map((w) => (w.obj as { err: Error }).err.message);
  return { logger, dropped };
}

/** A gateway on `port` that records, in the order it reads them, its `echo` calls and `note`s. */
async function recordingGateway(port: number) {
  const { gateway } = await res.gateway({}, port);
  const read: string[] = [];
  gateway.method('echo', ([key]: [string]) => {
    read.push(key);
    return key;
  });
  gateway.method('note', ([key]: [string]) => {
    read.push(key);
  });
  return { gateway, read };
}

describe('the offline queue a shared worker’s tabs share', () => {
  it('a tab past maxQueuedPerTab while disconnected: its call rejects, its notification is dropped and logged; other tabs queue on; all that was taken is sent on connecting', async () => {
    const port = await freePort();
    const url = `ws://127.0.0.1:${port}/rpc`;
    const { logger, dropped } = warnings();
    const host = makeHost({ maxQueuedPerTab: 2, logger });
    const greedy = openTab(host, url);
    const other = openTab(host, url);

    const first = greedy.call('echo', ['g1']);
    const giveUp = new AbortController();
    const second = greedy.call('echo', ['g2'], { signal: giveUp.signal });
    const third = await rejectionOf(greedy.call('echo', ['g3']));
    expect(third).toBeInstanceOf(NotConnectedError);
    expect((third as Error).message).toBe(
      'Not connected and this tab has 2 calls and notifications queued (maxQueuedPerTab of the shared worker)',
    );
    greedy.notify('note', ['g-note']);
    await waitFor(() => dropped().length === 1, 'the dropped notification logged');
    expect(dropped()).toEqual([(third as Error).message]);

    // A queued call given up makes room for another.
    giveUp.abort();
    expect(await rejectionOf(second)).toBeInstanceOf(CancelledError);
    const fourth = greedy.call('echo', ['g4']);

    // The other tab has a share of its own.
    const others = [other.call('echo', ['o1'])];
    other.notify('note', ['o-note']);
    await expect(rejectionOf(other.call('echo', ['o3']))).resolves.toBeInstanceOf(
      NotConnectedError,
    );

    const { read } = await recordingGateway(port);
    expect(await first).toBe('g1');
    expect(await fourth).toBe('g4');
    expect(await Promise.all(others)).toEqual(['o1']);
    // Once connected the shares are free again: nothing waits in the queue.
    expect(await greedy.call('echo', ['g5'])).toBe('g5');
    await waitFor(() => read.includes('o-note'), "the other tab's notification");
    expect(read.sort()).toEqual(['g1', 'g4', 'g5', 'o-note', 'o1']);
    expect(dropped()).toHaveLength(1);
  });

  it('notifications queued while connected, behind calls waiting for room, do not count against the tab’s share the next time it is disconnected', async () => {
    const port = await freePort();
    const url = `ws://127.0.0.1:${port}/rpc`;
    const host = makeHost({ maxQueuedPerTab: 2, maxPendingCalls: 1, maxCallsPerTab: 2 });
    const tab = openTab(host, url);
    // Disconnected: two calls take the tab's share.
    const held = [tab.call('hold', [1]), tab.call('hold', [2])];
    const { gateway, read } = await recordingGateway(port);
    const hold = holding(gateway);
    // Connected, one slot: the first call runs, the second waits in the queue for room, and the
    // notifications made now wait behind it, in order.
    await waitFor(() => hold.holds(1), 'the first call running');
    for (const key of ['n1', 'n2', 'n3']) tab.notify('note', [key]);
    hold.release(1);
    await waitFor(() => hold.holds(2), 'the second call running');
    hold.release(2);
    expect(await Promise.all(held)).toEqual([1, 2]);
    await waitFor(() => read.length === 3, 'the notifications');
    expect(read).toEqual(['n1', 'n2', 'n3']);
    await gateway.close();
    await waitFor(() => host.client?.state !== 'open', 'the client disconnected');
    // Nothing of the tab's waits now: its share is whole.
    const queued = [tab.call('echo', ['a']), tab.call('echo', ['b'])];
    await recordingGateway(port);
    expect(await Promise.all(queued)).toEqual(['a', 'b']);
  });

  it('maxQueuedPerTab is half the client’s maxQueued unless given', async () => {
    const port = await freePort();
    const url = `ws://127.0.0.1:${port}/rpc`;
    const host = makeHost({ maxQueued: 5 });
    const tab = openTab(host, url);
    const queued = [1, 2, 3].map((n) => tab.call('echo', [`q${n}`]));
    const refused = await rejectionOf(tab.call('echo', ['q4']));
    expect((refused as Error).message).toContain('this tab has 3 calls and notifications queued');
    await recordingGateway(port);
    expect(await Promise.all(queued)).toEqual(['q1', 'q2', 'q3']);
  });

  it('model: whatever two tabs call, notify and cancel while disconnected, and across reconnections, each holds at most its share, the queue at most maxQueued, and exactly what was taken is sent, in order', async () => {
    const share = 2;
    const maxQueued = 3;
    // `flush`: the gateway comes up (everything queued is sent), then goes away again; the
    // tabs' shares are free once more for the next time the client is disconnected.
    const op = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          tab: fc.constantFrom(0, 1),
          k: fc.constantFrom('call' as const, 'notify' as const, 'cancel' as const),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ tab: fc.constant(0), k: fc.constant('flush' as const) }),
      },
    );
    const seen = { perTab: 0, whole: 0, flushes: 0 };
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 3, maxLength: 12 }), async (ops) => {
        const port = await freePort();
        const url = `ws://127.0.0.1:${port}/rpc`;
        const { logger, dropped } = warnings();
        const host = makeHost({ maxQueuedPerTab: share, maxQueued, logger });
        const tabs = [rawTab(host, url), rawTab(host, url)];
        // The model: what each tab has queued (call ids and notification keys), in order.
        const queue: { tab: number; key: string; call?: number }[] = [];
        const refusedMessage: string[] = [];
        let n = 0;
        /**
         * The gateway up: exactly what was queued is sent, in order, each call answered; then,
         * unless `last`, down again, the client disconnected once more.
         */
        const flush = async (last: boolean): Promise<void> => {
          const { gateway, read } = await recordingGateway(port);
          try {
            const calls = queue.filter((q) => q.call !== undefined);
            for (const q of calls) {
              const result = await tabs[q.tab]!.next((m) => m.t === 'result' && m.id === q.call);
              expect(result).toMatchObject({ result: q.key });
            }
            await waitFor(() => read.length >= queue.length, `${queue.length} queued sent`);
            // A barrier call after the flush: anything sent past the model would be read by now.
            const barrier = ++n;
            tabs[0]!.send({ t: 'call', id: barrier, method: 'echo', params: sentParams(['last']) });
            await tabs[0]!.next((m) => m.t === 'result' && m.id === barrier);
            expect(read).toEqual([...queue.map((q) => q.key), 'last']);
            queue.length = 0;
          } finally {
            await gateway.close();
          }
          if (!last) {
            seen.flushes++;
            await waitFor(() => host.client?.state !== 'open', 'the client disconnected again');
          }
        };
        try {
          for (const { tab: t, k } of ops) {
            if (k === 'flush') {
              await flush(false);
              continue;
            }
            const tab = tabs[t]!;
            const from = tab.got.length;
            const mine = queue.filter((q) => q.tab === t);
            if (k === 'cancel') {
              const call = mine.find((q) => q.call !== undefined);
              if (!call) continue;
              tab.send({ t: 'cancel', id: call.call! });
              const result = await tab.next((m) => m.t === 'result' && m.id === call.call, from);
              expect(result).toMatchObject({ error: { name: 'CancelledError' } });
              queue.splice(queue.indexOf(call), 1);
              continue;
            }
            const key = `${k}-${t}-${++n}`;
            const refusal =
              mine.length >= share
                ? 'Not connected and this tab has 2 calls and notifications queued (maxQueuedPerTab of the shared worker)'
                : queue.length >= maxQueued
                  ? 'Not connected and 3 calls are already queued'
                  : undefined;
            if (refusal?.includes('this tab')) seen.perTab++;
            else if (refusal) seen.whole++;
            if (k === 'call') {
              tab.send({ t: 'call', id: n, method: 'echo', params: sentParams([key]) });
              if (refusal) {
                const result = await tab.next((m) => m.t === 'result' && m.id === n, from);
                expect(result).toMatchObject({
                  error: { name: 'NotConnectedError', message: refusal },
                });
              } else queue.push({ tab: t, key, call: n });
            } else {
              tab.send({ t: 'notify', method: 'note', params: sentParams([key]) });
              if (refusal) refusedMessage.push(refusal);
              else queue.push({ tab: t, key });
            }
            await tab.barrier();
            // Nothing taken was answered yet: it waits in the queue.
            expect(tab.got.slice(from).filter((m) => m.t === 'result' && m.id === n)).toHaveLength(
              k === 'call' && refusal ? 1 : 0,
            );
            expect(dropped()).toEqual(refusedMessage);
          }
          await flush(true);
        } finally {
          await host.close();
        }
      }),
      {
        numRuns: 15,
        examples: [
          // One run past both bounds whatever the random ones do: tab 1's call finds the queue
          // full (3), tab 0's third finds its share taken (2).
          [
            [
              { tab: 0, k: 'call' },
              { tab: 0, k: 'call' },
              { tab: 1, k: 'notify' },
              { tab: 1, k: 'call' },
              { tab: 0, k: 'call' },
            ],
          ],
          // A tab's whole share taken by notifications, sent once connected: the next time
          // the client is disconnected, the share is the tab's again.
          [
            [
              { tab: 0, k: 'notify' },
              { tab: 0, k: 'notify' },
              { tab: 0, k: 'flush' },
              { tab: 0, k: 'call' },
              { tab: 0, k: 'notify' },
            ],
          ],
        ],
      },
    );
    // The runs went past both bounds and connected mid-run (else the property says little).
    expect(seen.perTab).toBeGreaterThan(0);
    expect(seen.whole).toBeGreaterThan(0);
    expect(seen.flushes).toBeGreaterThan(0);
  });
});
