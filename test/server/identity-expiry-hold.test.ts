// What reaches a connection whose credentials expired while a refresh it sent in time is still
// being checked: nothing the expired identity authorized (its subscriptions' messages, the
// server's notifications and calls) until the new token is accepted; all of it, in order, once
// it is; none of it when it is refused (close 4419). Against a real gateway with a slow
// authenticate hook and a publisher.
import fc from 'fast-check';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { deferred, sleep } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

let running: RunningGateway<TestContext> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

/** Long enough for a subscribe and a refresh to arrive before the expiry on a busy machine. */
const TTL_MS = 1_000;

/**
 * A gateway whose refresh checks wait for the test (`release`), as a slow hook or a key-set fetch
 * for a new kid would; `began` counts the checks that started.
 */
async function startSlowRefresh(options: Partial<GatewayOptions<TestContext>> = {}) {
  const base = tokenIdentity({ refreshAheadMs: 0 });
  const gate = { release: deferred<void>(), began: 0 };
  running = await startGateway<TestContext>({
    ...base,
    ...options,
    authenticate: async (request) => {
      if (request.phase === 'upgrade') return base.authenticate!(request);
      gate.began++;
      await gate.release.promise;
      return base.authenticate!(request);
    },
  });
  running.gateway.topic('news.*');
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  return { running, gate };
}

async function open(url: string, bearer: string): Promise<RawRpc> {
  const socket = await openRawRpc(url, { authorization: `Bearer ${bearer}` });
  sockets.push(socket);
  return socket;
}

function sessionOf(gateway: RunningGateway<TestContext>['gateway']): Session<TestContext> {
  const [session] = gateway.sessions.values();
  return session!;
}

/** An expired session whose refresh (sent in time) is being checked: subscribed to news.a. */
async function expiredWhileChecking(gate: { release: Deferred<void>; began: number }) {
  const socket = await open(running!.url, token({ user: 'ann', ttl: TTL_MS }));
  const subscribed = await socket.request('subscribe', ['news.a']);
  expect(subscribed.error).toBeUndefined();
  const began = gate.began;
  const refresh = (user: string) =>
    socket.request('rpc.authenticate', { token: token({ user, ttl: 120_000 }) });
  return { socket, refresh, began, subscription: subscribed.result as string };
}

async function untilExpired(socket: RawRpc): Promise<void> {
  await waitUntil(async () => (await socket.request('whoami')).error !== undefined, 'expiry');
}

/**
 * The server's own protocol notices (a cancel of its rpc.token call, which the expiry overtook)
 * carry nothing of the application's: left out of what is compared.
 */
function appNotifications(socket: RawRpc): RawRpc['notifications'] {
  return socket.notifications.filter(({ method }) => method !== 'rpc.cancel');
}

/** What the socket was sent, in order: topic messages as `m:<data>`, other notifications by method. */
function seen(socket: RawRpc): string[] {
  return appNotifications(socket).map(({ method, params }) => {
    const p = params as { result?: unknown } | undefined;
    return method === 'subscription' || method === 'rpc.subscription'
      ? `m:${String(p?.result)}`
      : `n:${method}:${JSON.stringify(params)}`;
  });
}

describe('output of an expired session whose refresh is being checked', () => {
  it('is held while the check runs and sent in order once the token is accepted', async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    const { socket, refresh, began } = await expiredWhileChecking(gate);
    const calls: unknown[] = [];
    socket.handlers.set('poke', (params) => {
      calls.push(params);
      return 'poked';
    });
    await gateway.publish('news.a', 'before');
    await waitUntil(() => seen(socket).length === 1, 'the message before expiry');
    const reply = refresh('ann');
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);

    const session = sessionOf(gateway);
    await gateway.publish('news.a', 'after-1');
    session.notify('note', { n: 1 });
    const poked = session.call('poke', { n: 2 });
    await gateway.publish('news.a', 'after-2');
    await gateway.notifyUser('ann', 'note', { n: 3 });
    await sleep(150);
    // Nothing authorized by the expired identity reached the connection meanwhile.
    expect(seen(socket)).toEqual(['m:before']);
    expect(calls).toEqual([]);

    gate.release.resolve();
    expect((await reply).result).toMatchObject({ user: 'ann' });
    expect(await within(poked, 'the held call')).toBe('poked');
    await waitUntil(() => seen(socket).length === 5, 'the held output');
    expect(seen(socket)).toEqual([
      'm:before',
      'm:after-1',
      'n:note:{"n":1}',
      'm:after-2',
      'n:note:{"n":3}',
    ]);
    expect(calls).toEqual([{ n: 2 }]);
    // Live again: what follows goes out at once.
    await gateway.publish('news.a', 'later');
    await waitUntil(() => seen(socket).length === 6, 'a live message');
    expect(session.isClosed).toBe(false);
  });

  it("never sends a held message of a topic the accepted token no longer allows: that topic's subscription ends -32004, the rest go out in order", async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    gateway.topic('sports.*');
    const socket = await open(
      running!.url,
      token({ user: 'ann', ttl: TTL_MS, topics: ['news.*', 'sports.*'] }),
    );
    const news = await socket.request('subscribe', ['news.a']);
    const sports = await socket.request('subscribe', ['sports.a']);
    expect([news.error, sports.error]).toEqual([undefined, undefined]);
    const began = gate.began;
    // Accepted once checked: the same user, allowed news.* only.
    const reply = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000, topics: ['news.*'] }),
    });
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);

    await gateway.publish('sports.a', 'sports-held-1');
    await gateway.publish('news.a', 'news-held');
    await gateway.publish('sports.a', 'sports-held-2');
    gate.release.resolve();
    expect((await reply).error).toBeUndefined();
    await gateway.publish('news.a', 'news-live');
    await waitUntil(() => seen(socket).includes('m:news-live'), 'the live message');
    // Only news.a's messages, and sports.a's end: no message published to it after the expiry.
    const frames = appNotifications(socket).map(({ params }) => params as Record<string, unknown>);
    const ofSports = frames.filter((p) => p.subscription === sports.result);
    expect(ofSports).toEqual([
      expect.objectContaining({ error: expect.objectContaining({ code: -32004 }) }),
    ]);
    expect(seen(socket).filter((s) => s.startsWith('m:news') || s.startsWith('m:sports'))).toEqual([
      'm:news-held',
      'm:news-live',
    ]);
    expect(sessionOf(gateway).isClosed).toBe(false);
  });

  it('is never sent when the token is refused: 4419, and the held server call rejects', async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    const { socket, refresh, began } = await expiredWhileChecking(gate);
    const calls: unknown[] = [];
    socket.handlers.set('poke', (params) => calls.push(params));
    const reply = refresh('bob'); // another user: refused once checked
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);

    const session = sessionOf(gateway);
    await gateway.publish('news.a', 'after-1');
    session.notify('note', { n: 1 });
    const poked = session.call('poke', { n: 2 }).then(
      () => 'answered',
      () => 'rejected',
    );
    await gateway.publish('news.a', 'after-2');
    gate.release.resolve();
    expect((await reply).error).toMatchObject({ data: { reason: 'user-changed' } });
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
    expect(await poked).toBe('rejected');
    expect(seen(socket)).toEqual([]);
    expect(calls).toEqual([]);
  });

  it('is not sent after an expiry with no refresh under way, while the calls in flight finish', async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    // Answered well after the expiry: the close waits for it.
    gateway.method('slow', async () => {
      await sleep(TTL_MS + 600);
      return 'done';
    });
    const { socket } = await expiredWhileChecking(gate);
    const slow = socket.request('slow');
    await untilExpired(socket);
    await gateway.publish('news.a', 'after');
    sessionOf(gateway).notify('note', {});
    expect((await slow).result).toBe('done');
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
    expect(seen(socket)).toEqual([]);
  });

  /** A session expired while its refresh (to be accepted) is checked: its output is held. */
  async function holding(limits: GatewayOptions<TestContext>['limits']) {
    const { gate } = await startSlowRefresh({ limits });
    const { socket, refresh, began } = await expiredWhileChecking(gate);
    void refresh('ann');
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);
    return { gate, socket, session: sessionOf(running!.gateway) };
  }

  it('past limits.maxBufferedBytes held, closes the connection 1013 with none of it sent', async () => {
    const { gate, socket, session } = await holding({ maxBufferedBytes: 64 * 1024 });
    const chunk = 'x'.repeat(8 * 1024);
    for (let i = 0; i < 16 && !session.isClosed; i++) session.notify('bulk', { i, chunk });
    expect(await socket.closed).toMatchObject({ code: 1013 });
    expect(seen(socket)).toEqual([]);
    gate.release.resolve();
  });

  it('counts toward limits.maxBufferedBytesTotal: past it, the connection holding the most is closed 1013 with none of it sent', async () => {
    const { gate, socket, session } = await holding({
      maxBufferedBytes: 4 * 1024 * 1024,
      maxBufferedBytesTotal: 256 * 1024,
    });
    const chunk = 'x'.repeat(16 * 1024);
    // 32 × 16 KiB held: twice the node's total, an eighth of the connection's own bound.
    for (let i = 0; i < 32 && !session.isClosed; i++) {
      session.notify('bulk', { i, chunk });
      await sleep(0);
    }
    expect(await socket.closed).toEqual({ code: 1013, reason: 'output over budget' });
    expect(seen(socket)).toEqual([]);
    gate.release.resolve();
  });

  it('a generator stream is paused while its output is held, and goes on after the release: no value skipped', async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    const go = deferred<void>();
    const VALUES = 40;
    gateway.stream(
      'gen',
      async function* () {
        await go.promise;
        for (let i = 1; i <= VALUES; i++) yield `${i}:${'z'.repeat(300)}`;
      },
      { highWaterMark: 1024 },
    );
    const socket = await open(running!.url, token({ user: 'ann', ttl: TTL_MS }));
    expect((await socket.request('subscribe', ['gen'])).error).toBeUndefined();
    const began = gate.began;
    const reply = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);
    go.resolve();
    await sleep(50);
    expect(appNotifications(socket)).toEqual([]);
    gate.release.resolve();
    expect((await reply).error).toBeUndefined();
    await waitUntil(
      () => appNotifications(socket).some((n) => (n.params as { complete?: boolean }).complete),
      'the stream complete',
    );
    const got = appNotifications(socket)
      .map((n) => n.params as { result?: string; missed?: number })
      .filter((p) => p.result !== undefined || p.missed !== undefined);
    expect(got.map((p) => p.missed ?? 0).reduce((a, b) => a + b, 0)).toBe(0);
    expect(got.map((p) => Number(p.result!.split(':')[0]))).toEqual(
      Array.from({ length: VALUES }, (_, i) => i + 1),
    );
  });

  it("past a topic's highWaterMark, its slow-consumer policy applies: dropped messages are told as missed", async () => {
    const { gate } = await startSlowRefresh();
    const { gateway } = running!;
    gateway.topic('tiny', { highWaterMark: 1024, slowConsumer: 'drop' });
    const socket = await open(running!.url, token({ user: 'ann', ttl: TTL_MS }));
    expect((await socket.request('subscribe', ['tiny'])).error).toBeUndefined();
    const began = gate.began;
    const reply = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    await waitUntil(() => gate.began > began, 'the check');
    await untilExpired(socket);
    const data = 'y'.repeat(300);
    for (let i = 1; i <= 10; i++) await gateway.publish('tiny', `${i}:${data}`);
    await sleep(50);
    expect(appNotifications(socket)).toEqual([]);
    gate.release.resolve();
    expect((await reply).error).toBeUndefined();
    await gateway.publish('tiny', `11:${data}`);
    await waitUntil(
      () =>
        appNotifications(socket).some((n) =>
          String((n.params as { result: string }).result).startsWith('11:'),
        ),
      'the message after the release',
    );
    const got = appNotifications(socket).map(
      (n) => n.params as { result: string; missed?: number },
    );
    const numbers = got.map((p) => Number(p.result.split(':')[0]));
    const missed = got.reduce((sum, p) => sum + (p.missed ?? 0), 0);
    // Every message is either delivered, in order, or counted in `missed`.
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(numbers.length + missed).toBe(11);
    expect(missed).toBeGreaterThan(0);
  });
});

describe('how long an expired session waits for its refresh', () => {
  /** Wait until `ms` before the session's expiry. */
  async function untilBeforeExpiry(session: Session<TestContext>, ms: number): Promise<void> {
    await sleep(Math.max(0, session.expiresAt! - ms - Date.now()));
  }

  it('at most limits.authenticateTimeoutMs after expiry, however many tokens wait: then 4419', async () => {
    const timeoutMs = 600;
    const base = tokenIdentity({ refreshAheadMs: 0 });
    let checks = 0;
    running = await startGateway<TestContext>({
      ...base,
      limits: { authenticateTimeoutMs: timeoutMs },
      // Each check takes most of its time, and settles within it.
      authenticate: async (request) => {
        if (request.phase !== 'upgrade') {
          checks++;
          await sleep(timeoutMs * 0.75);
        }
        return base.authenticate!(request);
      },
    });
    running.gateway.topic('news.*');
    const socket = await open(running.url, token({ user: 'ann', ttl: TTL_MS }));
    expect((await socket.request('subscribe', ['news.a'])).error).toBeUndefined();
    const session = sessionOf(running.gateway);
    const expiresAt = session.expiresAt!;
    await untilBeforeExpiry(session, timeoutMs * 0.25);
    // Three refreshes sent in time, checked one after the other (each refused: another user).
    const bob = () =>
      socket.request('rpc.authenticate', { token: token({ user: 'bob', ttl: 90_000 }) });
    const replies = [bob(), bob(), bob()];
    await sleep(Math.max(0, expiresAt + 50 - Date.now()));
    await running.gateway.publish('news.a', 'after');
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
    // The check under way at the deadline runs to its end; the one behind it is not run.
    expect(checks).toBe(2);
    for (const reply of await Promise.all(replies)) expect(reply.error).toBeDefined();
    expect(appNotifications(socket)).toEqual([]);
  });

  it('a hook that never settles: refused as timed out, then 4419, nothing held sent', async () => {
    const timeoutMs = 300;
    const base = tokenIdentity({ refreshAheadMs: 0 });
    running = await startGateway<TestContext>({
      ...base,
      limits: { authenticateTimeoutMs: timeoutMs },
      authenticate: (request) =>
        request.phase === 'upgrade' ? base.authenticate!(request) : new Promise<never>(() => {}),
    });
    running.gateway.topic('news.*');
    const socket = await open(running.url, token({ user: 'ann', ttl: TTL_MS }));
    expect((await socket.request('subscribe', ['news.a'])).error).toBeUndefined();
    const session = sessionOf(running.gateway);
    const expiresAt = session.expiresAt!;
    await untilBeforeExpiry(session, 100);
    const reply = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    await sleep(Math.max(0, expiresAt + 50 - Date.now()));
    await running.gateway.publish('news.a', 'after');
    expect((await reply).error).toMatchObject({ data: { reason: 'unavailable', status: 503 } });
    expect(await socket.closed).toEqual({ code: 4419, reason: 'credentials expired' });
    expect(appNotifications(socket)).toEqual([]);
  });
});

describe('model: publishes and pushes around an expiry, the refresh accepted or refused', () => {
  // One gateway for every run; each run is one connection.
  let shared:
    | { running: RunningGateway<TestContext>; gate: { release: Deferred<void>; began: number } }
    | undefined;
  afterAll(async () => {
    await shared?.running.gateway.close();
  });

  type Op = { kind: 'publish'; topic: 'news.m' | 'sports.m' } | { kind: 'notify' };
  const op = fc.oneof(
    fc.constantFrom<Op>(
      { kind: 'publish', topic: 'news.m' },
      { kind: 'publish', topic: 'sports.m' },
    ),
    fc.constant<Op>({ kind: 'notify' }),
  );
  /** How the refresh ends: accepted allowing both topics, accepted allowing news.* only, refused. */
  const outcome = fc.constantFrom('both' as const, 'news-only' as const, 'refused' as const);

  it('accepted: everything the new token allows, in order, and an end for what it does not; refused: nothing after the expiry', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { maxLength: 4 }),
        fc.array(op, { minLength: 1, maxLength: 6 }),
        outcome,
        async (before, after, ending) => {
          if (!shared) {
            const base = tokenIdentity({ refreshAheadMs: 0 });
            const gate = { release: deferred<void>(), began: 0 };
            const started = await startGateway<TestContext>({
              ...base,
              authenticate: async (request) => {
                if (request.phase === 'upgrade') return base.authenticate!(request);
                gate.began++;
                await gate.release.promise;
                return base.authenticate!(request);
              },
            });
            started.gateway.topic('news.*');
            started.gateway.topic('sports.*');
            started.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
            shared = { running: started, gate };
          }
          const { gateway, url } = shared.running;
          const gate = shared.gate;
          gate.release = deferred<void>();
          const both = ['news.*', 'sports.*'];
          const socket = await openRawRpc(url, {
            authorization: `Bearer ${token({ user: 'ann', ttl: TTL_MS, topics: both })}`,
          });
          try {
            expect((await socket.request('subscribe', ['news.m'])).error).toBeUndefined();
            const sports = await socket.request('subscribe', ['sports.m']);
            expect(sports.error).toBeUndefined();
            const session = [...gateway.sessions.values()].find((s) => !s.isClosed)!;
            let n = 0;
            const run = async (ops: Op[]): Promise<string[]> => {
              const sent: string[] = [];
              for (const o of ops) {
                const label = String(++n);
                if (o.kind === 'publish') {
                  await gateway.publish(o.topic, `${o.topic}:${label}`);
                  sent.push(`m:${o.topic}:${label}`);
                } else {
                  session.notify('note', { label });
                  sent.push(`n:note:${JSON.stringify({ label })}`);
                }
              }
              return sent;
            };
            const sentBefore = await run(before);
            await waitUntil(() => seen(socket).length === sentBefore.length, 'before expiry');
            const began = gate.began;
            const reply = socket.request('rpc.authenticate', {
              token: token({
                user: ending === 'refused' ? 'bob' : 'ann',
                ttl: 120_000,
                topics: ending === 'news-only' ? ['news.*'] : both,
              }),
            });
            await waitUntil(() => gate.began > began, 'the check');
            await untilExpired(socket);
            const sentAfter = await run(after);
            await sleep(20);
            expect(seen(socket)).toEqual(sentBefore);
            gate.release.resolve();
            const answer = await reply;
            if (ending === 'refused') {
              expect(answer.error).toBeDefined();
              expect((await socket.closed).code).toBe(4419);
              expect(seen(socket)).toEqual(sentBefore);
              return;
            }
            expect(answer.error).toBeUndefined();
            // A marker after the held output: once it is here, all of that is.
            session.notify('marker', {});
            await waitUntil(() => seen(socket).at(-1) === 'n:marker:{}', 'the held output');
            const expected =
              ending === 'both' ? sentAfter : sentAfter.filter((s) => !s.startsWith('m:sports.m:'));
            const got = seen(socket).slice(sentBefore.length, -1);
            // sports.m's end (-32004) goes out in the place of its held messages, among the rest.
            const ended = got.indexOf('m:undefined');
            expect(ended >= 0).toBe(ending === 'news-only');
            expect(got.filter((s) => s !== 'm:undefined')).toEqual(expected);
            const ends = appNotifications(socket).filter(
              (x) => (x.params as { subscription?: unknown }).subscription === sports.result,
            );
            if (ending === 'news-only') {
              expect(ends.at(-1)?.params).toMatchObject({ error: { code: -32004 } });
            }
          } finally {
            socket.close();
            await socket.closed;
          }
        },
      ),
      { numRuns: 12, endOnFailure: true },
    );
  }, 90_000);
});
