/**
 * The server API for backends over real HTTP, with an API key, on one gateway (MemoryBroker):
 * every method against real clients (publish with its seq and with an idempotency key, broadcast,
 * notify, disconnect, calls to clients by session and by user, history, subscriber counts), the
 * refusals (401, no credentials configured, bad params naming the field) and the API on a path
 * of the gateway's own port.
 */
import { firstValueFrom } from 'rxjs';
import { take, toArray } from 'rxjs/operators';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { resolveServerApiConfig, startServerApi } from '../../src/server-api/index.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { noTracing } from '../../src/tracing/index.js';
import { sleep } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { waitFor, within } from '../support/waiting.js';
import { AUDIENCE, ISSUER, SECRET, now, signHs256, validClaims } from '../jwt/jwt-fixtures.js';
import { API_KEY, asUser, call, post, startApi, userOptions } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

async function setup() {
  const running = await res.gateway(userOptions());
  running.gateway.topic('news');
  running.gateway.topic('room.*');
  const api = await startApi(running.gateway);
  apis.push(api);
  return { ...running, api };
}

describe('server API over HTTP', () => {
  it('publish reaches a subscriber with the seq it returned', async () => {
    const { url, api } = await setup();
    const client = res.client(url);
    const got = firstValueFrom(client.subscribeWithMeta('news').pipe(take(1)));
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 1,
      'the subscription',
    );
    const result = await call(api.url, 'publish', { topic: 'news', data: { headline: 'hi' } });
    expect(result).toEqual({ seq: 1, duplicate: false });
    const event = await within(got, 'the message');
    expect(event.seq).toBe(1);
    expect(event.data).toEqual({ headline: 'hi' });
  });

  it('a publish retried with its idempotency key lands once, with the first seq', async () => {
    const { url, api } = await setup();
    const client = res.client(url);
    const seen: unknown[] = [];
    client.subscribeWithMeta('news').subscribe((event) => seen.push(event.data));
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 1,
      'the subscription',
    );
    await call(api.url, 'publish', { topic: 'news', data: 'before' });
    const params = { topic: 'news', data: 'once', idempotencyKey: 'order-17' };
    const first = await call(api.url, 'publish', params);
    const retries = await Promise.all([
      call(api.url, 'publish', params),
      call(api.url, 'publish', params),
    ]);
    expect(first).toEqual({ seq: 2, duplicate: false });
    expect(retries).toEqual([
      { seq: 2, duplicate: true },
      { seq: 2, duplicate: true },
    ]);
    // The same key on another topic is another publish.
    expect(await call(api.url, 'publish', { ...params, topic: 'room.1' })).toEqual({
      seq: 1,
      duplicate: false,
    });
    await call(api.url, 'publish', { topic: 'news', data: 'after' });
    await waitFor(() => seen.length === 3, 'three messages');
    expect(seen).toEqual(['before', 'once', 'after']);
  });

  it('broadcast publishes to each topic and returns each seq', async () => {
    const { url, api } = await setup();
    const client = res.client(url);
    const a = firstValueFrom(client.subscribe('room.a').pipe(take(1)));
    const b = firstValueFrom(client.subscribe('room.b').pipe(take(1)));
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'subscribers', { topic: 'room.b' })).count === 1,
      'the subscriptions',
    );
    await call(api.url, 'publish', { topic: 'room.a', data: 0 });
    const result = await call(api.url, 'broadcast', { topics: ['room.a', 'room.b'], data: 'all' });
    expect(result).toEqual({ seqs: { 'room.a': 2, 'room.b': 1 } });
    expect(await within(b, 'room.b')).toBe('all');
    expect(await within(a, 'room.a')).toBe(0);
  });

  it('notifyUser reaches every session of the user, notifySession one session', async () => {
    const { url, api, gateway } = await setup();
    const one = res.client(asUser(url, 'ann'));
    await one.call('rpc.ping');
    const oneSession = [...gateway.sessions.keys()][0]!;
    const two = res.client(asUser(url, 'ann'));
    const other = res.client(asUser(url, 'bob'));
    const toOne = firstValueFrom(one.notificationsOf('alert').pipe(take(2), toArray()));
    const toTwo: unknown[] = [];
    two.notificationsOf('alert').subscribe((params) => toTwo.push(params));
    let otherGot = 0;
    other.notificationsOf('alert').subscribe(() => otherGot++);
    await Promise.all([two.call('rpc.ping'), other.call('rpc.ping')]);
    expect(
      await call(api.url, 'notifyUser', { user: 'ann', method: 'alert', params: { n: 1 } }),
    ).toEqual({});
    expect(
      await call(api.url, 'notifySession', {
        sessionId: oneSession,
        method: 'alert',
        params: { n: 2 },
      }),
    ).toEqual({ delivered: true });
    expect(await within(toOne, 'both notifications')).toEqual([{ n: 1 }, { n: 2 }]);
    await waitFor(() => toTwo.length === 1, 'the user notification on the second session');
    expect(
      await call(api.url, 'notifySession', {
        sessionId: `${gateway.nodeId}-nobody`,
        method: 'alert',
      }),
    ).toEqual({ delivered: false });
    await sleep(50);
    expect(toTwo).toEqual([{ n: 1 }]);
    expect(otherGot).toBe(0);
  });

  it('disconnectUser closes the user with 4403 and the reason; disconnectSession one session', async () => {
    const { url, api, gateway } = await setup();
    const ann = await openSocket(res, asUser(url, 'ann'));
    const bob = await openSocket(res, asUser(url, 'bob'));
    const bob2 = await openSocket(res, asUser(url, 'bob'));
    await waitFor(() => gateway.sessions.size === 3, 'three sessions');
    const annClosed = closeOf(ann);
    expect(
      await call(api.url, 'disconnectUser', { user: 'ann', reason: 'signed out', denyForMs: 1000 }),
    ).toEqual({
      closedHere: 1,
    });
    expect(await within(annClosed, 'the close')).toEqual({ code: 4403, reason: 'signed out' });
    const bobSession = [...gateway.sessions.values()].find((s) => s.user === 'bob')!;
    const closes = [closeOf(bob), closeOf(bob2)];
    expect(
      await call(api.url, 'disconnectSession', { sessionId: bobSession.id, reason: 'bye' }),
    ).toEqual({ found: true });
    const first = await within(Promise.race(closes), 'a close');
    expect(first).toEqual({ code: 4403, reason: 'bye' });
    await sleep(50);
    expect([...gateway.sessions.values()].filter((s) => s.user === 'bob')).toHaveLength(1);
  });

  it('callClient calls a client by session and answers with its result or its error unchanged', async () => {
    const { url, api, gateway } = await setup();
    const client = res.client(asUser(url, 'ann'));
    client.method('add', (params: { a: number; b: number }) => params.a + params.b);
    client.method('fail', () => {
      throw Object.assign(new Error('no'), {});
    });
    await client.call('rpc.ping');
    const session = [...gateway.sessions.values()][0]!;
    expect(
      await call(api.url, 'callClient', {
        sessionId: session.id,
        method: 'add',
        params: { a: 2, b: 3 },
      }),
    ).toEqual({
      result: 5,
    });
    const missing = await post(api.url, 'callClient', { sessionId: session.id, method: 'nope' });
    expect(missing.body?.error?.code).toBe(-32601);
    const slow = res.client(asUser(url, 'slow'));
    slow.method('wait', () => sleep(2_000));
    await slow.call('rpc.ping');
    const slowSession = [...gateway.sessions.values()].find((s) => s.user === 'slow')!;
    const timedOut = await post(api.url, 'callClient', {
      sessionId: slowSession.id,
      method: 'wait',
      timeoutMs: 100,
    });
    expect(timedOut.body?.error?.code).toBe(-32012);
    const gone = await post(api.url, 'callClient', {
      sessionId: `${gateway.nodeId}-nobody`,
      method: 'add',
    });
    expect(gone.body?.error).toMatchObject({ code: -32602, data: { field: 'sessionId' } });
  });

  it('callClient by user calls every session of the user', async () => {
    const { url, api, gateway } = await setup();
    for (const name of ['first', 'second']) {
      const client = res.client(asUser(url, 'ann'));
      client.method('whoami', () => name);
      await client.call('rpc.ping');
    }
    const result = await call<{ results: { sessionId: string; result: string }[] }>(
      api.url,
      'callClient',
      {
        user: 'ann',
        method: 'whoami',
      },
    );
    expect(result.results.map((r) => r.result).sort()).toEqual(['first', 'second']);
    expect(result.results.map((r) => r.sessionId).sort()).toEqual(
      [...gateway.sessions.keys()].sort(),
    );
    expect(await call(api.url, 'callClient', { user: 'nobody', method: 'whoami' })).toEqual({
      results: [],
    });
  });

  it('history pages through a topic, subscribers counts its subscribers', async () => {
    const { url, api } = await setup();
    for (let i = 1; i <= 5; i++) await call(api.url, 'publish', { topic: 'news', data: i });
    expect(await call(api.url, 'history', { topic: 'news', since: 1, limit: 2 })).toMatchObject({
      messages: [
        { seq: 2, data: 2 },
        { seq: 3, data: 3 },
      ],
      lastSeq: 5,
      more: true,
    });
    expect(await call(api.url, 'history', { topic: 'news', since: 3 })).toMatchObject({
      messages: [
        { seq: 4, data: 4 },
        { seq: 5, data: 5 },
      ],
      more: false,
    });
    expect(await call(api.url, 'history', { topic: 'room.none' })).toEqual({
      messages: [],
      lastSeq: 0,
      more: false,
    });
    expect(await call(api.url, 'subscribers', { topic: 'news' })).toEqual({ count: 0, nodes: 1 });
    const clients = [res.client(url), res.client(url)];
    for (const client of clients) client.subscribe('news').subscribe();
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'subscribers', { topic: 'news' })).count === 2,
      'two subscribers',
    );
  });

  it('members pages through who is subscribed to a presence topic; a topic without is -32602', async () => {
    const running = await res.gateway(userOptions());
    running.gateway.topic('lobby', { presence: true });
    running.gateway.topic('news');
    const api = await startApi(running.gateway);
    apis.push(api);
    const clients = [res.client(running.url), res.client(running.url)];
    for (const client of clients) client.subscribe('lobby').subscribe();
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'members', { topic: 'lobby' })).count === 2,
      'both members',
    );
    const first = await call<{ count: number; members: { sessionId: string }[]; cursor?: string }>(
      api.url,
      'members',
      { topic: 'lobby', limit: 1 },
    );
    expect(first.members).toHaveLength(1);
    expect(first.cursor).toBeDefined();
    const second = await call<{ members: { sessionId: string }[] }>(api.url, 'members', {
      topic: 'lobby',
      cursor: first.cursor,
    });
    const ids = [...first.members, ...second.members].map((m) => m.sessionId).sort();
    expect(ids).toEqual([...running.gateway.sessions.keys()].sort());
    const without = await post(api.url, 'members', { topic: 'news' });
    expect(without.body?.error).toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { field: 'topic' },
    });
  });

  it('a missing or wrong key is 401, and nothing is done', async () => {
    const { api, gateway } = await setup();
    for (const key of [null, 'wrong-key-0123456789abcdef', `${API_KEY}x`]) {
      const reply = await post(api.url, 'publish', { topic: 'news', data: 1 }, key);
      expect(reply.status).toBe(401);
    }
    expect((await gateway.broker.history('news', 0)).lastSeq).toBe(0);
  });

  it('takes a JWT that jwtAuth verifies, and refuses a bad or expired one', async () => {
    const running = await res.gateway(userOptions());
    const api = await startApi(running.gateway, {
      keys: [],
      jwt: { secret: SECRET, issuer: ISSUER, audience: AUDIENCE },
    });
    apis.push(api);
    const good = await signHs256();
    expect((await post(api.url, 'subscribers', { topic: 'news' }, good)).body?.result).toEqual({
      count: 0,
      nodes: 1,
    });
    const expired = await signHs256(validClaims({ exp: now() - 3600 }));
    const forged = await signHs256(validClaims(), 'another-secret-of-at-least-32-bytes!!!');
    for (const token of [expired, forged, API_KEY]) {
      expect((await post(api.url, 'subscribers', { topic: 'news' }, token)).status).toBe(401);
    }
  });

  it('refuses to start without credentials', async () => {
    const { gateway } = await setup();
    expect(() => resolveServerApiConfig({ listen: { port: 0 } })).toThrow(/keys.*jwt.*never open/);
    const open = { ...resolveServerApiConfig({ listen: { port: 0 }, keys: [API_KEY] }), keys: [] };
    await expect(
      startServerApi(gateway, open, { logger: silentLogger, tracing: noTracing }),
    ).rejects.toThrow(/never open/);
  });

  it('bad params are -32602 naming the field', async () => {
    const { api } = await setup();
    const cases: [string, unknown, string][] = [
      ['publish', { data: 1 }, 'topic'],
      ['publish', { topic: '$node.x', data: 1 }, 'topic'],
      ['publish', { topic: 'news' }, 'data'],
      ['publish', { topic: 'news', data: 1, idempotencyKey: '' }, 'idempotencyKey'],
      ['publish', { topic: 'news', data: 1, extra: 1 }, 'extra'],
      ['broadcast', { topics: ['news', 5], data: 1 }, 'topics[1]'],
      ['notifyUser', { user: 'ann', method: 'rpc.reconnect' }, 'method'],
      ['callClient', { method: 'x' }, 'sessionId'],
      ['callClient', { sessionId: 'a-b', method: 'x', timeoutMs: 0 }, 'timeoutMs'],
      ['history', { topic: 'news', limit: 100_000 }, 'limit'],
      ['disconnectUser', { user: 'ann', denyForMs: -1 }, 'denyForMs'],
    ];
    for (const [method, params, field] of cases) {
      const reply = await post(api.url, method, params);
      expect(reply.body?.error, `${method} ${JSON.stringify(params)}`).toMatchObject({
        code: -32602,
        data: { field },
      });
      expect(reply.body?.error?.message).toContain(field);
    }
    expect((await post(api.url, 'publish', ['news', 1])).body?.error?.code).toBe(-32602);
    expect((await post(api.url, 'nope')).body?.error?.code).toBe(-32601);
  });

  it("serves on a path of the gateway's own port", async () => {
    const running = await res.gateway(userOptions());
    running.gateway.topic('news');
    const config = resolveServerApiConfig({ path: '/api', keys: [API_KEY] });
    const api = await startServerApi(running.gateway, config, {
      logger: silentLogger,
      tracing: noTracing,
      server: running.gateway.httpServer,
    });
    apis.push(api);
    expect(api.url).toBeUndefined();
    const url = `${running.httpUrl}/api`;
    expect(await call(url, 'publish', { topic: 'news', data: 1 })).toEqual({
      seq: 1,
      duplicate: false,
    });
    expect(
      (await post(url, 'publish', { topic: 'news', data: 1 }, 'nope-nope-nope-nope')).status,
    ).toBe(401);
    expect((await fetch(`${running.httpUrl}/readyz`)).status).toBe(200);
  });
});
