/**
 * The HTTP streaming fallback on the server, driven by a raw HTTP client: a session over an
 * SSE stream and POSTs (calls, batches, subscriptions, a server-to-client call), a resume by
 * Last-Event-ID with nothing lost or repeated, the bounds (replay, grace, a reader that never
 * reads), authentication and drain.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import { KEPT_EVENT_BYTES } from '../../src/transport/sse-transport.js';
import { startGateway } from '../support/gateway.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { openRaw, upgradeRefusal } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';
import { exchange, openStream, post, resumeHeaders, sessionHeaders } from './sse-raw.js';
import type { RawStream } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
const resources = new Resources();
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await resources.cleanup();
});

async function sseGateway<C = unknown>(options: GatewayOptions<C> = {}) {
  const running = await startGateway<C>({ routes: { events: '/rpc/events' }, ...options });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const events = `${running.httpUrl}/rpc/events`;
  const open = async (headers?: Record<string, string>): Promise<RawStream> => {
    const stream = await openStream(events, { headers });
    cleanups.push(() => stream.destroy());
    return stream;
  };
  return { ...running, events, open };
}

const call = (id: number, method: string, params: unknown = []): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method, params });

const withId = (id: unknown) => (events: { data: string }[]) =>
  events.some((e) => (JSON.parse(e.data) as { id?: unknown }).id === id);

describe('HTTP streaming fallback (server)', () => {
  it('is off unless routes.events names its path', async () => {
    const { httpUrl, gateway } = await startGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const stream = await openStream(`${httpUrl}/rpc/events`);
    expect(stream.status).toBe(404);
  });

  it('answers calls and batches POSTed to the session on its event stream', async () => {
    const { gateway, events, open } = await sseGateway();
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const stream = await open();
    expect(stream.status).toBe(200);
    expect(stream.response.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.session.session).toMatch(/^[\w-]{16,}$/);
    expect(gateway.sessions.size).toBe(1);
    expect([...gateway.sessions.values()][0]!.transport.kind).toBe('sse');

    expect((await post(events, stream.session, call(1, 'add', [1, 2]))).status).toBe(202);
    await stream.until(withId(1));
    const batch = `[${call(2, 'add', [2, 2])},${call(3, 'add', [3, 3])}]`;
    expect((await post(events, stream.session, batch)).status).toBe(202);
    await stream.until((e) => e.length >= 3);
    const [, reply, batchReply] = stream.events;
    expect(reply!.id).toBe('1');
    expect(JSON.parse(reply!.data)).toEqual({ jsonrpc: '2.0', id: 1, result: 3 });
    expect(batchReply!.id).toBe('2');
    expect(JSON.parse(batchReply!.data)).toEqual([
      { jsonrpc: '2.0', id: 2, result: 4 },
      { jsonrpc: '2.0', id: 3, result: 6 },
    ]);
  });

  it('refuses a POST without the session secret (404, as for an unknown session)', async () => {
    const { events, open } = await sseGateway();
    const stream = await open();
    const wrong = { session: stream.session.session, secret: 'x'.repeat(32) };
    expect((await post(events, wrong, call(1, 'rpc.ping'))).status).toBe(404);
    const unknown = { session: 'nope', secret: stream.session.secret };
    expect((await post(events, unknown, call(1, 'rpc.ping'))).status).toBe(404);
  });

  it('carries subscriptions and a server-to-client call', async () => {
    const { gateway, events, open } = await sseGateway();
    gateway.topic('feed');
    gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
    const stream = await open();
    await post(events, stream.session, call(1, 'subscribe', ['feed']));
    await stream.until(withId(1));
    await gateway.publish('feed', { n: 1 });
    await stream.until((e) => e.some((m) => m.data.includes('"n":1')));

    await post(events, stream.session, call(2, 'ask'));
    const [request] = (
      await stream.until((e) => e.some((m) => m.data.includes('client.name')))
    ).filter((m) => m.data.includes('client.name'));
    const { id } = JSON.parse(request!.data) as { id: number };
    await post(events, stream.session, JSON.stringify({ jsonrpc: '2.0', id, result: 'sse' }));
    await stream.until(withId(2));
    expect(stream.messages()).toContainEqual({ jsonrpc: '2.0', id: 2, result: 'sse' });
  });

  it('resumes a dropped stream by Last-Event-ID with nothing lost or repeated', async () => {
    const { gateway, events, open } = await sseGateway();
    gateway.topic('feed');
    const first = await open();
    await post(events, first.session, call(1, 'subscribe', ['feed']));
    await first.until(withId(1));
    for (let n = 1; n <= 3; n++) await gateway.publish('feed', n);
    await first.until((e) => e.length >= 5);
    const lastSeen = first.events.at(-1)!.id!;
    first.destroy();
    await first.ended;
    for (let n = 4; n <= 6; n++) await gateway.publish('feed', n);

    const second = await open(resumeHeaders(first.session, lastSeen));
    expect(second.status).toBe(200);
    await second.until((e) => e.length >= 4);
    for (let n = 7; n <= 8; n++) await gateway.publish('feed', n);
    await second.until((e) => e.length >= 6);
    const results = (stream: RawStream) =>
      stream
        .messages()
        .map((m) => (m as { params?: { result?: number } }).params?.result)
        .filter((n) => n !== undefined);
    expect([...results(first), ...results(second)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const ids = [...first.events, ...second.events].filter((e) => e.id).map((e) => Number(e.id));
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('closes a session (1008) asked to resume from before what its replay buffer holds', async () => {
    const { gateway, events, open } = await sseGateway({ limits: { sseReplayBytes: 200 } });
    gateway.topic('feed');
    const first = await open();
    await post(events, first.session, call(1, 'subscribe', ['feed']));
    await first.until(withId(1));
    first.destroy();
    for (let n = 1; n <= 10; n++) await gateway.publish('feed', 'x'.repeat(50));
    const second = await open(resumeHeaders(first.session, 1));
    await second.until((e) => e.some((m) => m.event === 'close'));
    const close = second.events.find((e) => e.event === 'close');
    expect(JSON.parse(close!.data)).toMatchObject({ code: 1008 });
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
    // The session is gone: its id answers 404 from now on.
    expect((await post(events, first.session, call(2, 'rpc.ping'))).status).toBe(404);
  });

  it('counts each kept event as its text plus KEPT_EVENT_BYTES: tiny events keep it bounded too', async () => {
    const replayBytes = 10_000;
    const { events, open } = await sseGateway({
      limits: { sseReplayBytes: replayBytes, ratePerSecond: 0 },
    });
    const first = await open();
    // 100 answers of rpc.ping, an event each.
    for (let id = 1; id <= 100; id++) await post(events, first.session, call(id, 'rpc.ping'));
    await first.until(withId(100));
    first.destroy();
    const last = Number(first.events.at(-1)!.id);
    const text = first.events.at(-1)!.data;
    const kept = Math.floor(replayBytes / (Buffer.byteLength(text) + KEPT_EVENT_BYTES));
    expect(kept).toBeLessThan(100);
    // From within what is kept: resumed. From before it: closed 1008.
    const resumed = await open(resumeHeaders(first.session, last - kept + 1));
    expect(resumed.status).toBe(200);
    resumed.destroy();
    const late = await open(resumeHeaders(first.session, last - kept - 5));
    await late.until((e) => e.some((m) => m.event === 'close'));
    const close = late.events.find((e) => e.event === 'close');
    expect(JSON.parse(close!.data)).toMatchObject({ code: 1008 });
  });

  it('closes a session whose stream stays away past sseGraceMs', async () => {
    const { gateway, open } = await sseGateway({ limits: { sseGraceMs: 100 } });
    const stream = await open();
    expect(gateway.sessions.size).toBe(1);
    stream.destroy();
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
  });

  it('closes a session whose stream is not read past maxBufferedBytes, memory bounded', async () => {
    const { gateway, events } = await sseGateway({ limits: { maxBufferedBytes: 256 * 1024 } });
    const stream = await openStream(events, { noRead: true });
    cleanups.push(() => stream.destroy());
    await waitUntil(() => gateway.sessions.size === 1, 'the session opened');
    const session = [...gateway.sessions.values()][0]!;
    const big = 'y'.repeat(64 * 1024);
    for (let i = 0; i < 200 && !session.isClosed; i++) {
      session.notify('big', [big]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
    expect(session.isClosed).toBe(true);
  });

  it('counts the stream in maxBufferedBytesTotal: over it, the session closes', async () => {
    const { gateway, events } = await sseGateway({
      limits: { maxBufferedBytesTotal: 128 * 1024, maxBufferedBytes: 0 },
    });
    const stream = await openStream(events, { noRead: true });
    cleanups.push(() => stream.destroy());
    await waitUntil(() => gateway.sessions.size === 1, 'the session opened');
    const session = [...gateway.sessions.values()][0]!;
    const big = 'z'.repeat(64 * 1024);
    for (let i = 0; i < 200 && !session.isClosed; i++) {
      session.notify('big', [big]);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
  });

  it('authenticates the stream with the same hook (Bearer header)', async () => {
    const { gateway, events, open } = await sseGateway<{ user: string }>({
      authenticate: (request) => {
        if (request.token !== 'good') throw new UpgradeRejection(401, 'Unauthorized');
        return { user: 'ann' };
      },
    });
    gateway.method('who', (_params, ctx) => ctx.session.context.user);
    const refused = await open();
    expect(refused.status).toBe(401);
    expect(gateway.sessions.size).toBe(0);
    const stream = await open({ authorization: 'Bearer good' });
    expect(stream.status).toBe(200);
    await post(events, stream.session, call(1, 'who'));
    await stream.until(withId(1));
    expect(stream.messages()).toContainEqual({ jsonrpc: '2.0', id: 1, result: 'ann' });
  });

  it('drains: an rpc.reconnect event, then the stream ends with 1012', async () => {
    const { gateway, open } = await sseGateway();
    const stream = await open();
    await gateway.drain({ deadlineMs: 1_000 });
    await stream.ended;
    expect(stream.messages()).toContainEqual(expect.objectContaining({ method: 'rpc.reconnect' }));
    const close = stream.events.find((e) => e.event === 'close');
    expect(JSON.parse(close!.data)).toMatchObject({ code: 1012 });
  });
});

describe('HTTP streaming fallback: a failing identity hook', () => {
  const failing: [string, GatewayOptions<{ user: string }>][] = [
    [
      'authenticate throws',
      {
        authenticate: () => {
          throw new Error('the user store is down');
        },
      },
    ],
    [
      'userOf throws',
      {
        authenticate: () => ({ user: 'ann' }),
        userOf: () => {
          throw new Error('no user in this context');
        },
      },
    ],
  ];

  it.each(failing)('(%s) is answered as the WebSocket upgrade answers it', async (_, options) => {
    const { gateway, url, httpUrl, open } = await sseGateway(options);
    const upgrade = await upgradeRefusal(resources, url);
    const stream = await open();
    await stream.ended;
    expect(upgrade.status).toBe(500);
    expect({ status: stream.status, body: stream.body }).toEqual({
      status: upgrade.status,
      body: upgrade.body,
    });
    expect(gateway.sessions.size).toBe(0);
    const rejected = sampleValue(await scrape(httpUrl), 'rpc_rejected_upgrades_total', {
      reason: 'auth-error',
    });
    expect(rejected).toBe(2);
  });
});

describe('HTTP streaming fallback: metrics', () => {
  it('counts each session and its messages under its transport: sse, websocket, tcp', async () => {
    const { gateway, events, open, httpUrl, url } = await sseGateway();
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const stream = await open();
    await post(events, stream.session, call(1, 'add', [1, 2]));
    await post(events, stream.session, call(2, 'add', [2, 3]));
    await stream.until(withId(2));
    const ws = await openRaw(resources, url);
    expect((await ws.request('add', [1, 1])).result).toBe(2);
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const tcp = connect({ host: '127.0.0.1', port });
    cleanups.push(() => tcp.destroy());
    tcp.setEncoding('utf8');
    let lines = '';
    tcp.on('data', (chunk: string) => (lines += chunk));
    tcp.write(`${call(1, 'add', [0, 1])}\n${call(2, 'add', [0, 2])}\n${call(3, 'add', [0, 3])}\n`);
    await waitUntil(() => lines.split('\n').length > 3, 'three answers over TCP');

    const text = await scrape(httpUrl);
    const count = (name: string, transport: string) => sampleValue(text, name, { transport });
    const seen = (transport: string) => [
      count('rpc_connections', transport),
      count('rpc_messages_received_total', transport),
      count('rpc_messages_sent_total', transport),
    ];
    expect(seen('sse')).toEqual([1, 2, 2]);
    expect(seen('websocket')).toEqual([1, 1, 1]);
    expect(seen('tcp')).toEqual([1, 3, 3]);
    expect(seen('stdio')).toEqual([0, 0, 0]);
  });
});

describe('HTTP streaming fallback: CORS', () => {
  const page = 'http://app.example';
  const stranger = 'http://evil.example';

  const corsOf = (headers: Record<string, string | string[] | undefined>) => ({
    origin: headers['access-control-allow-origin'],
    credentials: headers['access-control-allow-credentials'],
    vary: headers['vary'],
  });
  const granted = { origin: page, credentials: 'true', vary: 'Origin' };
  const none = { origin: undefined, credentials: undefined, vary: undefined };

  it('grants an allowed origin the preflight, the stream, POST, a resume and DELETE', async () => {
    const { gateway, events, open } = await sseGateway({ allowedOrigins: [page] });
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const wanted = 'authorization, content-type, last-event-id, x-wsrpc-secret, x-wsrpc-session';
    for (const method of ['GET', 'POST', 'DELETE']) {
      const preflight = await exchange(events, 'OPTIONS', {
        origin: page,
        'access-control-request-method': method,
        'access-control-request-headers': wanted,
      });
      expect(preflight.status).toBe(204);
      expect(corsOf(preflight.headers)).toEqual(granted);
      const methods = String(preflight.headers['access-control-allow-methods']).split(/,\s*/);
      expect(methods).toContain(method);
      const allowed = String(preflight.headers['access-control-allow-headers'])
        .toLowerCase()
        .split(/,\s*/);
      expect(allowed).toEqual(expect.arrayContaining(wanted.split(', ')));
    }

    const stream = await open({ origin: page });
    expect(stream.status).toBe(200);
    expect(corsOf(stream.response.headers)).toEqual(granted);
    const sent = await exchange(
      events,
      'POST',
      sessionHeaders(stream.session, { origin: page, 'content-type': 'application/json' }),
      call(1, 'add', [2, 2]),
    );
    expect(sent.status).toBe(202);
    expect(corsOf(sent.headers)).toEqual(granted);
    await stream.until(withId(1));

    const resumed = await open({ ...resumeHeaders(stream.session, 1), origin: page });
    expect(resumed.status).toBe(200);
    expect(corsOf(resumed.response.headers)).toEqual(granted);
    const ended = await exchange(
      events,
      'DELETE',
      sessionHeaders(stream.session, { origin: page }),
    );
    expect(ended.status).toBe(204);
    expect(corsOf(ended.headers)).toEqual(granted);
    await waitUntil(() => gateway.sessions.size === 0, 'the session ended');
  });

  it('refuses an origin not allowed (403, no CORS headers) on every request', async () => {
    const { gateway, events, open } = await sseGateway({ allowedOrigins: [page] });
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    const preflight = await exchange(events, 'OPTIONS', {
      origin: stranger,
      'access-control-request-method': 'POST',
    });
    expect(preflight.status).toBe(403);
    expect(corsOf(preflight.headers)).toEqual(none);

    const refused = await open({ origin: stranger });
    expect(refused.status).toBe(403);
    expect(corsOf(refused.response.headers)).toEqual(none);
    expect(gateway.sessions.size).toBe(0);

    // A session opened from the allowed page: a stranger that learnt its id and secret gets
    // nowhere with it.
    const stream = await open({ origin: page });
    const headers = sessionHeaders(stream.session, {
      origin: stranger,
      'content-type': 'application/json',
    });
    const sent = await exchange(events, 'POST', headers, call(1, 'add', [1, 1]));
    expect(sent.status).toBe(403);
    expect(corsOf(sent.headers)).toEqual(none);
    const resumed = await open({ ...resumeHeaders(stream.session, 0), origin: stranger });
    expect(resumed.status).toBe(403);
    expect(corsOf(resumed.response.headers)).toEqual(none);
    const ended = await exchange(events, 'DELETE', headers);
    expect(ended.status).toBe(403);
    expect(gateway.sessions.size).toBe(1);

    // The refused POST never reached the session: the next call's reply is the first event.
    await post(events, stream.session, call(2, 'add', [2, 2]));
    await stream.until(withId(2));
    expect(stream.messages()).toEqual([{ jsonrpc: '2.0', id: 2, result: 4 }]);
  });

  it('grants no cross-origin use without an allowedOrigins list (preflight 403)', async () => {
    const { events, open } = await sseGateway();
    const preflight = await exchange(events, 'OPTIONS', {
      origin: page,
      'access-control-request-method': 'POST',
    });
    expect(preflight.status).toBe(403);
    expect(corsOf(preflight.headers)).toEqual(none);
    const stream = await open({ origin: page });
    expect(corsOf(stream.response.headers)).toEqual(none);
  });
});
