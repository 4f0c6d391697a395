import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { noTracing } from '../../src/tracing/index.js';
import { resolveHooksConfig, upstreamHooks } from '../../src/upstream-hooks/index.js';
import type { HookIdentity, LifecycleEvent } from '../../src/upstream-hooks/index.js';
import { newSession, sessionIds, startGateway } from '../support/gateway.js';
import { scrape, sampleValue } from '../support/metrics.js';
import { sleep } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';
import { openRawRpc } from '../server/raw-rpc.js';
import type { RawRpc } from '../server/raw-rpc.js';
import { startHookUpstream } from './hook-upstream.js';
import type { HookUpstream } from './hook-upstream.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function upstream(): Promise<HookUpstream> {
  const started = await startHookUpstream();
  cleanups.push(() => started.stop().catch(() => undefined));
  return started;
}

/** A gateway wired with the hooks of `section`, every hook calling `auth` at `url`. */
async function gatewayWithHooks(
  url: string,
  section: Record<string, unknown>,
  options: GatewayOptions<HookIdentity> = {},
) {
  const config = resolveHooksConfig({
    upstreams: { auth: { url, timeoutMs: 10_000 } },
    hooks: section,
  });
  const hooks = upstreamHooks(config, { logger: silentLogger, tracing: noTracing });
  const running = await startGateway<HookIdentity>({
    authenticate: hooks.authenticate,
    userOf: hooks.userOf,
    ...options,
    identity: { ...hooks.identity, ...options.identity },
  });
  hooks.attach(running.gateway);
  running.gateway.topic('private.*', { authorize: hooks.authorizeTopic });
  running.gateway.topic('public.*');
  cleanups.push(() => running.gateway.close());
  cleanups.push(() => hooks.close());
  return { ...running, hooks };
}

async function connect(url: string, token?: string): Promise<RawRpc> {
  const rpc = await openRawRpc(
    url,
    token === undefined ? {} : { authorization: `Bearer ${token}` },
  );
  cleanups.push(() => rpc.close());
  return rpc;
}

/** The status and headers of a refused upgrade (or 101). */
function upgrade(
  url: string,
  token?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    socket.once('open', () => {
      socket.close();
      resolve({ status: 101, headers: {}, body: '' });
    });
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    socket.once('error', reject);
  });
}

/** The connect hook of the tests: `good-<user>` tokens, `banned` 403 with a status, others 401. */
function decideConnect(auth: HookUpstream): void {
  auth.answer('wsrpc.connect', (params) => {
    const token = params['token'];
    if (typeof token === 'string' && token.startsWith('good-')) {
      const user = token.slice(5);
      return { result: { context: { user, plan: 'pro' }, user, methods: ['allowed.*'] } };
    }
    if (token === 'banned')
      return { error: { code: -32004, message: 'Banned', data: { status: 451 } } };
    if (token === 'forbidden') return { error: { code: -32004, message: 'Forbidden here' } };
    return { error: { code: -32010, message: 'Bad token' } };
  });
}

describe('the connect hook', () => {
  it('accepts with the context and the user it answers, shown the selected headers, query and token', async () => {
    const auth = await upstream();
    decideConnect(auth);
    const { gateway, url } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    gateway.method('allowed.whoami', (_p, ctx) => ctx.session.context);
    gateway.method('other.thing', () => 'no');
    const before = sessionIds(gateway);
    const rpc = await connect(`${url}?room=7`, 'good-ann');
    const session = newSession(gateway, before) as Session<HookIdentity>;
    expect(session.context).toEqual({
      context: { user: 'ann', plan: 'pro' },
      user: 'ann',
      methods: ['allowed.*'],
    });
    expect(gateway.config.auth.userOf?.(session.context)).toBe('ann');
    const [request] = auth.of('wsrpc.connect');
    expect(request!.params).toEqual({
      transport: 'websocket',
      remoteAddress: '127.0.0.1',
      headers: { authorization: 'Bearer good-ann' },
      query: { room: '7' },
      token: 'good-ann',
      phase: 'upgrade',
    });
    expect((await rpc.request('allowed.whoami')).result).toMatchObject({ user: 'ann' });
    // The hook's methods restrict what the session may call (identity.methodsOf).
    expect((await rpc.request('other.thing')).error?.code).toBe(-32004);
  });

  it('refuses at the upgrade: -32010 is 401, -32004 is 403, data.status picks another 4xx', async () => {
    const auth = await upstream();
    decideConnect(auth);
    const { url } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    expect(await upgrade(url, 'nonsense')).toMatchObject({ status: 401, body: 'Bad token\n' });
    expect(await upgrade(url)).toMatchObject({ status: 401 });
    expect(await upgrade(url, 'forbidden')).toMatchObject({
      status: 403,
      body: 'Forbidden here\n',
    });
    expect(await upgrade(url, 'banned')).toMatchObject({ status: 451, body: 'Banned\n' });
  });

  it('fails closed: an upstream down or hanging is 503 with Retry-After', async () => {
    const auth = await upstream();
    decideConnect(auth);
    const { url, httpUrl } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth', timeoutMs: 200 },
    });
    auth.answer('wsrpc.connect', 'hang');
    const hung = await upgrade(url, 'good-ann');
    expect(hung).toMatchObject({ status: 503, body: 'Connect hook unavailable\n' });
    expect(hung.headers['retry-after']).toBe('1');
    await auth.stop();
    expect(await upgrade(url, 'good-ann')).toMatchObject({ status: 503 });
    auth.answer('wsrpc.connect', { result: 'not an object' });
    await auth.start();
    expect(await upgrade(url, 'good-ann')).toMatchObject({ status: 503 });
    const metrics = await scrape(httpUrl);
    expect(
      sampleValue(metrics, 'wsrpc_hook_outcomes_total', { hook: 'connect', outcome: 'failed' }),
    ).toBe(3);
  });

  it('onFailure: allow lets a client in with an anonymous context when the upstream is down', async () => {
    const auth = await upstream();
    await auth.stop();
    const { gateway, url } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth', onFailure: 'allow' },
    });
    const before = sessionIds(gateway);
    await connect(url, 'good-ann');
    const session = newSession(gateway, before);
    expect(session.context).toEqual({ context: null, anonymous: true });
    expect(gateway.config.auth.userOf?.(session.context)).toBeUndefined();
  });

  it('decides in-band too: rpc.authenticate accepted with the user, refused with -32010 and its message', async () => {
    const auth = await upstream();
    decideConnect(auth);
    const { url } = await gatewayWithHooks(
      auth.url,
      { connect: { upstream: 'auth' } },
      { identity: { inBand: true } },
    );
    const rpc = await connect(url);
    const refused = await rpc.request('rpc.authenticate', { token: 'forbidden' });
    expect(refused.error).toMatchObject({
      code: -32010,
      message: 'Forbidden here',
      data: { status: 403 },
    });
    const accepted = await rpc.request('rpc.authenticate', { token: 'good-bob' });
    expect(accepted.result).toMatchObject({ user: 'bob' });
    expect(auth.of('wsrpc.connect').map((r) => r.params['phase'])).toEqual(['in-band', 'in-band']);
  });

  it('gives expiresAt and topics to the identity hooks', async () => {
    const auth = await upstream();
    const expiresAt = Date.now() + 60_000;
    auth.answer('wsrpc.connect', {
      result: { context: {}, user: 'cy', expiresAt, topics: ['public.news'] },
    });
    const { gateway, url } = await gatewayWithHooks(auth.url, { connect: { upstream: 'auth' } });
    const before = sessionIds(gateway);
    const rpc = await connect(url, 'any');
    expect(newSession(gateway, before).expiresAt).toBe(expiresAt);
    expect((await rpc.request('subscribe', ['public.news'])).result).toEqual(expect.any(String));
    expect((await rpc.request('subscribe', ['public.other'])).error?.code).toBe(-32004);
  });
});

describe('the subscribe hook', () => {
  it('decides the topics its patterns name, with the session, user, context and params', async () => {
    const auth = await upstream();
    decideConnect(auth);
    auth.answer('wsrpc.subscribe', (params) => ({
      result: { allow: String(params['topic']).startsWith(`private.${String(params['user'])}.`) },
    }));
    const { url } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth' },
      subscribe: { upstream: 'auth', topics: ['private.*'] },
    });
    const rpc = await connect(url, 'good-ann');
    const allowed = await rpc.request('subscribe', {
      topic: 'private.ann.inbox',
      params: { reason: 'mail' },
    });
    expect(allowed.result).toEqual(expect.any(String));
    const refused = await rpc.request('subscribe', { topic: 'private.bob.inbox' });
    expect(refused.error).toMatchObject({ code: -32004 });
    const [asked] = auth.of('wsrpc.subscribe');
    expect(asked!.params).toEqual({
      sessionId: expect.any(String),
      user: 'ann',
      context: { user: 'ann', plan: 'pro' },
      topic: 'private.ann.inbox',
      params: { reason: 'mail' },
    });
    expect(asked!.headers['x-wsrpc-session']).toBe(asked!.params['sessionId']);
  });

  it('asks nothing for topics outside its patterns', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.subscribe', { result: { allow: false } });
    const { gateway, url } = await gatewayWithHooks(auth.url, {
      subscribe: { upstream: 'auth', topics: ['private.secret'] },
    });
    gateway.topic('private2.*', {});
    const rpc = await connect(url);
    expect((await rpc.request('subscribe', ['private.open'])).result).toEqual(expect.any(String));
    expect((await rpc.request('subscribe', ['private.secret'])).error?.code).toBe(-32004);
    expect(auth.of('wsrpc.subscribe')).toHaveLength(1);
  });

  it('fails closed by default (-32004), and allows with onFailure: allow', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.subscribe', 'hang');
    const closed = await gatewayWithHooks(auth.url, {
      subscribe: { upstream: 'auth', timeoutMs: 100 },
    });
    const rpc = await connect(closed.url);
    expect((await rpc.request('subscribe', ['private.x'])).error?.code).toBe(-32004);
    auth.answer('wsrpc.subscribe', { error: { code: -32601, message: 'Method not found' } });
    expect((await rpc.request('subscribe', ['private.y'])).error?.code).toBe(-32004);
    const open = await gatewayWithHooks(auth.url, {
      subscribe: { upstream: 'auth', onFailure: 'allow' },
    });
    const other = await connect(open.url);
    expect((await other.request('subscribe', ['private.z'])).result).toEqual(expect.any(String));
    const metrics = await scrape(closed.httpUrl);
    expect(
      sampleValue(metrics, 'wsrpc_hook_outcomes_total', { hook: 'subscribe', outcome: 'failed' }),
    ).toBe(2);
  });
});

describe('the events hook', () => {
  const eventsOf = (auth: HookUpstream): LifecycleEvent[] =>
    auth.of('wsrpc.events').flatMap((r) => r.params['events'] as LifecycleEvent[]);

  it('sends connects, subscribes, unsubscribes and disconnects in batches', async () => {
    const auth = await upstream();
    decideConnect(auth);
    auth.answer('wsrpc.events', { result: null });
    const { url } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth' },
      // No flush by time within the test: batches are cut by size alone, whatever the machine's load.
      events: { upstream: 'auth', batchSize: 3, flushIntervalMs: 60_000 },
    });
    const ann = await connect(url, 'good-ann');
    const sub = await ann.request('subscribe', ['public.news']);
    expect((await ann.request('unsubscribe', [sub.result])).result).toBe(true);
    ann.close();
    const bob = await connect(url, 'good-bob');
    bob.close();
    await waitFor(
      () => eventsOf(auth).length === 6,
      () => JSON.stringify(eventsOf(auth)),
    );
    const events = eventsOf(auth);
    expect(events.map((e) => [e.type, e.user, e.topic])).toEqual([
      ['connect', 'ann', undefined],
      ['subscribe', 'ann', 'public.news'],
      ['unsubscribe', 'ann', 'public.news'],
      ['disconnect', 'ann', undefined],
      ['connect', 'bob', undefined],
      ['disconnect', 'bob', undefined],
    ]);
    expect(events[3]).toMatchObject({
      code: 1005,
      at: expect.any(Number),
      sessionId: events[0]!.sessionId,
    });
    const batches = auth.of('wsrpc.events').map((r) => (r.params['events'] as unknown[]).length);
    expect(batches).toEqual([3, 3]);
  });

  it('tells an unsubscribe for each subscription the gateway ends, and none for those a disconnect ends', async () => {
    const auth = await upstream();
    decideConnect(auth);
    auth.answer('wsrpc.events', { result: null });
    const { url, gateway } = await gatewayWithHooks(auth.url, {
      connect: { upstream: 'auth' },
      events: { upstream: 'auth', flushIntervalMs: 20 },
    });
    const before = sessionIds(gateway);
    const ann = await connect(url, 'good-ann');
    const session = newSession(gateway, before);
    const news = await ann.request('subscribe', ['public.news']);
    await ann.request('subscribe', ['public.sport']);
    await ann.request('subscribe', ['public.sport']);
    // The server makes the session leave both of its subscriptions to public.sport.
    expect(await gateway.leave(session.id, 'public.sport')).toBe(true);
    // The server makes it join one: told as a subscribe, as the client's own.
    expect(await gateway.join(session.id, 'public.weather')).toBe(true);
    expect((await ann.request('unsubscribe', [news.result])).result).toBe(true);
    // An unsubscribe of what is not (any more) there tells nothing.
    expect((await ann.request('unsubscribe', [news.result])).result).toBe(false);
    ann.close();
    const types = () => eventsOf(auth).map((e) => [e.type, e.user, e.topic]);
    await waitFor(
      () => eventsOf(auth).some((e) => e.type === 'disconnect'),
      () => JSON.stringify(types()),
    );
    // The subscription to public.weather ended with the connection: the disconnect says so.
    expect(types()).toEqual([
      ['connect', 'ann', undefined],
      ['subscribe', 'ann', 'public.news'],
      ['subscribe', 'ann', 'public.sport'],
      ['subscribe', 'ann', 'public.sport'],
      ['unsubscribe', 'ann', 'public.sport'],
      ['unsubscribe', 'ann', 'public.sport'],
      ['subscribe', 'ann', 'public.weather'],
      ['unsubscribe', 'ann', 'public.news'],
      ['disconnect', 'ann', undefined],
    ]);
    expect(new Set(eventsOf(auth).map((e) => e.sessionId))).toEqual(new Set([session.id]));
  });

  it('sends only the events listed', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.events', { result: null });
    const { url } = await gatewayWithHooks(auth.url, {
      events: { upstream: 'auth', events: ['disconnect'], flushIntervalMs: 20 },
    });
    (await connect(url)).close();
    await waitFor(() => eventsOf(auth).length === 1, 'the disconnect');
    await sleep(100);
    expect(eventsOf(auth).map((e) => e.type)).toEqual(['disconnect']);
  });

  it('retries a batch until the upstream comes back', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.events', { result: null });
    await auth.stop();
    const { url } = await gatewayWithHooks(auth.url, {
      events: { upstream: 'auth', events: ['connect'], retries: 6, flushIntervalMs: 20 },
    });
    await connect(url);
    await sleep(300);
    await auth.start();
    await waitFor(
      () => eventsOf(auth).length === 1,
      'the connect event after the upstream came back',
      10_000,
    );
  });

  it('drops a batch after its retries, counted as undeliverable', async () => {
    const auth = await upstream();
    auth.answer('wsrpc.events', { error: { code: -32603, message: 'down' } });
    const { url, httpUrl } = await gatewayWithHooks(auth.url, {
      events: { upstream: 'auth', events: ['connect'], retries: 1, flushIntervalMs: 20 },
    });
    await connect(url);
    await waitFor(() => auth.of('wsrpc.events').length === 2, 'two attempts');
    await waitFor(
      async () =>
        sampleValue(await scrape(httpUrl), 'wsrpc_hook_events_dropped_total', {
          reason: 'undeliverable',
        }) === 1,
      'the drop counted',
    );
  });

  it('keeps at most maxQueued, dropping the oldest, and never holds a connect', async () => {
    const auth = await upstream();
    let release = false;
    // The first batch is held until released, and its timeout never fires: a connect that
    // waited for the events hook would never finish.
    auth.answer('wsrpc.events', () => (release ? { result: null } : 'hold'));
    const { url, httpUrl, gateway } = await gatewayWithHooks(auth.url, {
      events: {
        upstream: 'auth',
        events: ['connect'],
        maxQueued: 2,
        batchSize: 1,
        flushIntervalMs: 10,
        timeoutMs: 2 ** 31 - 1,
        retries: 1,
      },
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const before = sessionIds(gateway);
      await connect(url);
      ids.push(newSession(gateway, before).id);
      if (i === 0)
        await waitFor(() => auth.of('wsrpc.events').length === 1, 'the first batch in flight');
    }
    // All five opened while the first batch was still unanswered.
    expect(auth.of('wsrpc.events')).toHaveLength(1);
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'wsrpc_hook_events_dropped_total', { reason: 'overflow' })).toBe(2);
    expect(sampleValue(metrics, 'wsrpc_hook_events_queued')).toBe(2);
    release = true;
    auth.releaseHeld();
    await waitFor(() => auth.of('wsrpc.events').length >= 3, 'the first batch and the two newest');
    const delivered = auth
      .of('wsrpc.events')
      .flatMap((r) => (r.params['events'] as LifecycleEvent[]).map((e) => e.sessionId));
    // The first event was in flight; events 2 and 3 were dropped.
    expect([...new Set(delivered)]).toEqual([ids[0], ids[3], ids[4]]);
  });
  it('at close, after the batch under way fails, drops what waits without sending it', async () => {
    const auth = await upstream();
    let failing = false;
    auth.answer('wsrpc.events', () =>
      failing ? { error: { code: -32603, message: 'down' } } : 'hold',
    );
    const { url, httpUrl, gateway, hooks } = await gatewayWithHooks(auth.url, {
      events: { upstream: 'auth', events: ['connect'], batchSize: 1, flushIntervalMs: 10 },
    });
    for (let i = 0; i < 3; i++) {
      await connect(url);
      if (i === 0)
        await waitFor(() => auth.of('wsrpc.events').length === 1, 'the first batch in flight');
    }
    await waitFor(
      async () => sampleValue(await scrape(httpUrl), 'wsrpc_hook_events_queued') === 2,
      'two events waiting',
    );
    const closing = hooks.close();
    failing = true;
    auth.releaseHeld();
    await closing;
    // One request: the one under way. The upstream failing as the gateway closes, each of the
    // waiting batches would have cost a request (and a timeout, for an upstream that hangs).
    expect(auth.of('wsrpc.events')).toHaveLength(1);
    const metrics = await gateway.metrics.registry.metrics();
    expect(
      sampleValue(metrics, 'wsrpc_hook_events_dropped_total', { reason: 'undeliverable' }),
    ).toBe(3);
  });
});
