import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { HOOK_HANG_RETRY_FACTOR } from '../../src/server/run-authenticate.js';
import { deferred } from '../support/promises.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade } from '../support/sockets.js';

let running: RunningGateway<TestContext> | undefined;
const sockets: RawRpc[] = [];
/** Upgrades tried by hand (attemptUpgrade). */
const upgrades = new Resources();
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await upgrades.cleanup();
  await running?.gateway.close();
  running = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function start(refreshAheadMs = 30_000) {
  running = await startGateway<TestContext>(tokenIdentity({ refreshAheadMs }));
  const { gateway } = running;
  gateway.topic('news.*');
  gateway.topic('sports.*');
  gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  gateway.method('slow', async () => {
    await sleep(400);
    return 'done';
  });
  return running;
}

async function open(url: string, bearer: string): Promise<RawRpc> {
  const socket = await openRawRpc(url, { authorization: `Bearer ${bearer}` });
  sockets.push(socket);
  return socket;
}

async function subscribe(socket: RawRpc, topic: string): Promise<string> {
  const reply = await socket.request('subscribe', [topic]);
  expect(reply.error).toBeUndefined();
  return reply.result as string;
}

/** The subscription ids that got a message, and the final frames, among the notifications. */
function received(socket: RawRpc) {
  const messages = new Map<string, unknown[]>();
  const ends = new Map<string, unknown>();
  for (const { params } of socket.notifications) {
    const p = params as { subscription: string; result?: unknown; error?: unknown };
    if (p.error !== undefined) ends.set(p.subscription, p.error);
    else messages.set(p.subscription, [...(messages.get(p.subscription) ?? []), p.result]);
  }
  return { messages, ends };
}

/**
 * A gateway whose refresh checks are slow (a key-set fetch for a new kid): each waits for
 * `checking`, which the test resolves once it has seen the expiry; `seen` resolves when one began.
 */
async function startWithSlowRefresh() {
  const base = tokenIdentity({ refreshAheadMs: 0 });
  const checking = deferred<void>();
  const seen = deferred<void>();
  running = await startGateway<TestContext>({
    ...base,
    authenticate: async (request) => {
      if (request.phase === 'upgrade') return base.authenticate!(request);
      seen.resolve();
      await checking.promise;
      return base.authenticate!(request);
    },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return { running, checking, seen };
}

describe('refresh and expiry', () => {
  it('rpc.authenticate on a live connection replaces the context and keeps every subscription', async () => {
    const { gateway, url } = await start();
    const socket = await open(url, token({ user: 'ann', ttl: 60_000 }));
    const a = await subscribe(socket, 'news.a');
    const b = await subscribe(socket, 'sports.b');
    const [session] = gateway.sessions.values();
    const before = session!.expiresAt!;
    const reply = await socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    const result = reply.result as { sessionId: string; user: string; expiresAt: number };
    expect(result).toMatchObject({ sessionId: session!.id, user: 'ann' });
    expect(result.expiresAt).toBeGreaterThan(before + 50_000);
    expect(session!.expiresAt).toBe(result.expiresAt);
    await gateway.publish('news.a', 1);
    await gateway.publish('sports.b', 2);
    await socket.notificationsAt(2);
    const { messages, ends } = received(socket);
    expect(messages.get(a)).toEqual([1]);
    expect(messages.get(b)).toEqual([2]);
    expect(ends.size).toBe(0);
  });

  it('asks the client for a fresh token refreshAheadMs before expiry, and keeps the connection', async () => {
    const { gateway, url } = await start(400);
    const socket = await open(url, token({ user: 'ann', ttl: 600 }));
    const asked: unknown[] = [];
    socket.handlers.set('rpc.token', (params) => {
      asked.push(params);
      return { token: token({ user: 'ann', ttl: 60_000 }) };
    });
    const [session] = gateway.sessions.values();
    const first = session!.expiresAt!;
    await sleep(900); // past the first token's expiry
    expect(asked).toEqual([{ expiresAt: first }]);
    expect(session!.expiresAt).toBeGreaterThan(first + 50_000);
    expect((await socket.request('whoami')).result).toBe('ann');
    expect(session!.isClosed).toBe(false);
  });

  it('refuses a refresh for another user (-32010 user-changed); the old identity stays', async () => {
    const { gateway, url } = await start();
    const socket = await open(url, token({ user: 'ann', ttl: 60_000 }));
    const reply = await socket.request('rpc.authenticate', { token: token({ user: 'bob' }) });
    expect(reply.error).toMatchObject({
      code: ErrorCode.Unauthenticated,
      data: { reason: 'user-changed' },
    });
    const [session] = gateway.sessions.values();
    expect(session!.context.user).toBe('ann');
    expect((await socket.request('whoami')).result).toBe('ann');
  });

  it('at expiry without refresh: new calls -32010 expired, the call in flight answered, then 4419', async () => {
    const { url } = await start(0);
    const socket = await open(url, token({ user: 'ann', ttl: 300 }));
    await sleep(100);
    const slow = socket.request('slow'); // answers at ~500 ms, after the expiry at 300 ms
    await sleep(300);
    const refused = await socket.request('whoami');
    expect(refused.error).toEqual({
      code: ErrorCode.Unauthenticated,
      message: 'Unauthenticated',
      data: { reason: 'expired' },
    });
    const late = await socket.request('rpc.authenticate', { token: token({ user: 'ann' }) });
    expect(late.error).toMatchObject({ data: { reason: 'expired' } });
    expect((await slow).result).toBe('done');
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
  });

  it('a refresh sent before expiry and accepted after it keeps the connection; calls meanwhile get -32010', async () => {
    const { checking, seen } = await startWithSlowRefresh();
    // Long enough for the refresh to arrive before the expiry on a busy machine.
    const socket = await open(running!.url, token({ user: 'ann', ttl: 1_500 }));
    const refresh = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    await seen.promise;
    // The old identity expires while the token is checked: new calls are refused meanwhile.
    await waitUntil(async () => (await socket.request('whoami')).error !== undefined, 'expiry');
    expect((await socket.request('whoami')).error).toMatchObject({ data: { reason: 'expired' } });
    checking.resolve();
    expect((await refresh).result).toMatchObject({ user: 'ann' });
    expect((await socket.request('whoami')).result).toBe('ann');
    const [session] = running!.gateway.sessions.values();
    expect(session!.isClosed).toBe(false);
  });

  it('a refresh sent before expiry and refused after it: answered, then 4419', async () => {
    const { checking, seen } = await startWithSlowRefresh();
    // Long enough for the refresh to arrive before the expiry on a busy machine.
    const socket = await open(running!.url, token({ user: 'ann', ttl: 1_500 }));
    const refresh = socket.request('rpc.authenticate', {
      token: token({ user: 'bob', ttl: 120_000 }),
    });
    await seen.promise;
    await waitUntil(async () => (await socket.request('whoami')).error !== undefined, 'expiry');
    checking.resolve();
    expect((await refresh).error).toMatchObject({ data: { reason: 'user-changed' } });
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
  });

  it('a refresh with fewer rights ends exactly the subscriptions it no longer allows (-32004)', async () => {
    const { gateway, url } = await start();
    gateway.topic('vip.*', { authorize: ({ session }) => session.context.methods !== undefined });
    const socket = await open(
      url,
      token({ user: 'ann', ttl: 60_000, topics: ['news.*', 'sports.*', 'vip.*'], methods: ['*'] }),
    );
    const newsA = await subscribe(socket, 'news.a');
    const newsB = await subscribe(socket, 'news.b');
    const sports = await subscribe(socket, 'sports.x');
    const vip = await subscribe(socket, 'vip.lounge');
    // news.b is no longer in the claims; vip.* is, but its own authorize now says no.
    const reply = await socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 60_000, topics: ['news.a', 'sports.*', 'vip.*'] }),
    });
    expect(reply.error).toBeUndefined();
    await socket.notificationsAt(2);
    const { ends } = received(socket);
    expect([...ends.keys()].sort()).toEqual([newsB, vip].sort());
    expect(ends.get(newsB)).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'news.b' },
    });
    expect(ends.get(vip)).toMatchObject({ code: ErrorCode.Unauthorized });
    for (const topic of ['news.a', 'news.b', 'sports.x', 'vip.lounge']) {
      await gateway.publish(topic, topic);
    }
    await socket.notificationsAt(4);
    await sleep(50);
    const { messages } = received(socket);
    expect(Object.fromEntries(messages)).toEqual({ [newsA]: ['news.a'], [sports]: ['sports.x'] });
    // The connection and the kept subscriptions are untouched.
    expect((await socket.request('whoami')).result).toBe('ann');
    expect(gateway.pubsub.subscriptionCount([...gateway.sessions.values()][0]!)).toBe(2);
  });

  it('a refresh with fewer rights ends the $presence subscriptions of topics it no longer allows (-32004)', async () => {
    const { gateway, url } = await start();
    gateway.topic('room.*', { presence: true });
    const socket = await open(
      url,
      token({ user: 'ann', ttl: 60_000, topics: ['room.*'], methods: ['*'] }),
    );
    const presenceOf = async (topic: string): Promise<string> => {
      const reply = await socket.request('subscribe', ['$presence', { topic }]);
      expect(reply.error).toBeUndefined();
      return reply.result as string;
    };
    const kept = await presenceOf('room.a');
    const refused = await presenceOf('room.b');
    // Each sends its first page, { count, members }.
    await socket.notificationsAt(2);
    const reply = await socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 60_000, topics: ['room.a'], methods: ['*'] }),
    });
    expect(reply.error).toBeUndefined();
    await socket.notificationsAt(3);
    const { ends, messages } = received(socket);
    expect([...ends.keys()]).toEqual([refused]);
    expect(ends.get(refused)).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'room.b' },
    });
    expect([...messages.keys()].sort()).toEqual([kept, refused].sort());
    expect(gateway.pubsub.subscriptionCount([...gateway.sessions.values()][0]!)).toBe(1);
  });

  it("a topic's authorize is told a re-check at a refresh (refresh: true), for the topic and its $presence", async () => {
    const { gateway, url } = await start();
    const asked: { topic: string; refresh: boolean | undefined }[] = [];
    gateway.topic('room.*', {
      presence: true,
      authorize: ({ topic, refresh }) => {
        asked.push({ topic, refresh });
        return true;
      },
    });
    const socket = await open(
      url,
      token({ user: 'ann', ttl: 60_000, topics: ['room.*'], methods: ['*'] }),
    );
    expect((await socket.request('subscribe', ['room.a'])).error).toBeUndefined();
    expect((await socket.request('subscribe', ['$presence', { topic: 'room.b' }])).error).toBe(
      undefined,
    );
    expect(asked).toEqual([
      { topic: 'room.a', refresh: undefined },
      { topic: 'room.b', refresh: undefined },
    ]);
    const reply = await socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 60_000, topics: ['room.*'], methods: ['*'] }),
    });
    expect(reply.error).toBeUndefined();
    await waitUntil(() => asked.length === 4, 'both re-checked');
    expect(asked.slice(2).sort((a, b) => a.topic.localeCompare(b.topic))).toEqual([
      { topic: 'room.a', refresh: true },
      { topic: 'room.b', refresh: true },
    ]);
  });
});

describe('a hook that hangs', () => {
  it("holds a closed connection's slot until its run settles: closing and opening again starts no more runs than the limit", async () => {
    const base = tokenIdentity();
    const hanging = deferred<TestContext>();
    running = await startGateway<TestContext>({
      ...base,
      heartbeatIntervalMs: 0,
      limits: { authenticateTimeoutMs: 200, maxConnectionsPerIp: 1, connectionsPerSecondPerIp: 0 },
      authenticate: (request) =>
        request.phase === 'upgrade' ? base.authenticate!(request) : hanging.promise,
    });
    const socket = await open(running.url, token({ user: 'ann', ttl: 60_000 }));
    const reply = await socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    expect(reply.error).toMatchObject({ data: { reason: 'unavailable', status: 503 } });
    socket.close();
    await socket.closed;
    await waitUntil(() => running!.gateway.sessions.size === 0, 'the session gone');
    // The run the connection left going keeps its place: refused before the hook is asked.
    expect(await attemptUpgrade(upgrades, running.url)).toBe(429);
    hanging.resolve({ user: 'ann', expiresAt: Date.now() + 120_000 } as TestContext);
    // Then the address is admitted again (and refused 401 here: this attempt has no token).
    await waitUntil(
      async () => (await attemptUpgrade(upgrades, running!.url)) === 401,
      'the slot released',
    );
  });

  it('leaves one run behind per connection per HOOK_HANG_RETRY_FACTOR timeouts: the tokens after it are refused without running it again', async () => {
    const base = tokenIdentity();
    const hanging = deferred<TestContext>();
    let runs = 0;
    const timeoutMs = 300;
    running = await startGateway<TestContext>({
      ...base,
      limits: { authenticateTimeoutMs: timeoutMs },
      authenticate: (request) => {
        if (request.phase === 'upgrade') return base.authenticate!(request);
        runs++;
        return hanging.promise;
      },
    });
    running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const socket = await open(running.url, token({ user: 'ann', ttl: 60_000 }));
    const refresh = () =>
      socket.request('rpc.authenticate', { token: token({ user: 'ann', ttl: 120_000 }) });
    const unavailable = {
      code: ErrorCode.Unauthenticated,
      message: 'Authentication timed out',
      data: { reason: 'unavailable', status: 503 },
    };
    for (let i = 0; i < 5; i++) expect((await refresh()).error).toEqual(unavailable);
    expect(runs).toBe(1);
    // The session keeps the identity it had, and goes on.
    expect((await socket.request('whoami')).result).toBe('ann');
    // A run that never settles keeps the hook from the connection for a while, not for ever.
    await sleep(HOOK_HANG_RETRY_FACTOR * timeoutMs + 100);
    expect((await refresh()).error).toEqual(unavailable);
    expect(runs).toBe(2);
    // Once the runs settle, the next token runs the hook again (this time answered at once).
    hanging.resolve({ user: 'ann', expiresAt: Date.now() + 120_000 } as TestContext);
    await sleep(10);
    expect((await refresh()).result).toMatchObject({ user: 'ann' });
    expect(runs).toBe(3);
  });
});
