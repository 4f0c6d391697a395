import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, untilAborted } from '../support/promises.js';
import { recordStates, waitForState } from '../support/client.js';
import { upgradeRefusal } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const NOTICE = { jsonrpc: '2.0', method: 'rpc.reconnect', params: {} };
/** The barrier the gateway sends after the notice: its answer comes after what came before. */
const PING = { jsonrpc: '2.0', method: 'rpc.ping', id: expect.any(Number) as unknown };

describe('gateway.drain() (in process)', () => {
  it('readiness 503, upgrades 503, notice to everyone, in-flight calls finish, then 1012', async () => {
    const gate = deferred();
    const { url, httpUrl, gateway } = await res.demoGateway();
    gateway.method('slow', async () => {
      await gate.promise;
      return 'finished';
    });
    const busy = await openRaw(res, url);
    const idle = await openRaw(res, url);
    busy.answerPings();
    idle.answerPings();
    busy.send({ jsonrpc: '2.0', method: 'slow', id: 'in-flight' });
    await waitUntil(
      () => [...gateway.sessions.values()].some((s) => s.peer.inFlightCount === 1),
      'the call to start',
    );

    let drained = false;
    const draining = gateway.drain({ deadlineMs: 15_000 }).then(() => (drained = true));

    await busy.until(() => busy.frames.some((f) => f.method === 'rpc.reconnect'), 'the notice');
    await idle.until(() => idle.frames.some((f) => f.method === 'rpc.reconnect'), 'the notice');
    expect(busy.frames.slice(0, 2)).toEqual([NOTICE, PING]);
    expect(idle.frames.slice(0, 2)).toEqual([NOTICE, PING]);

    // The idle session goes once it has answered the ping; the busy one waits for its call.
    expect(await idle.closed).toEqual({ code: 1012, reason: 'service restart' });
    expect(busy.socket.readyState).toBe(WebSocket.OPEN);

    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: 'draining', sessions: 1 });
    const refused = await upgradeRefusal(res, url);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).toBe('Server shutting down\n');

    // A call arriving after the notice is refused; the one in flight is not affected.
    expect((await busy.request('sum', [1, 2])).error).toEqual({
      code: ErrorCode.ShuttingDown,
      message: 'Server shutting down',
    });
    expect(drained).toBe(false);

    gate.resolve();
    expect(await busy.response('in-flight')).toEqual({
      jsonrpc: '2.0',
      result: 'finished',
      id: 'in-flight',
    });
    expect(await busy.closed).toEqual({ code: 1012, reason: 'service restart' });
    await draining;
    expect(gateway.httpServer.listening).toBe(false);
    expect(gateway.sessions.size).toBe(0);
  });

  it('closes a session whose call outlives the deadline anyway, with 1012', async () => {
    const { url, gateway } = await res.demoGateway();
    const aborted = deferred<unknown>();
    gateway.method('forever', (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.resolve(ctx.signal.reason));
      return untilAborted(ctx.signal);
    });
    const raw = await openRaw(res, url);
    raw.answerPings();
    raw.send({ jsonrpc: '2.0', method: 'forever', id: 1 });
    await waitUntil(
      () => [...gateway.sessions.values()].some((s) => s.peer.inFlightCount === 1),
      'the call to start',
    );
    await gateway.drain({ deadlineMs: 100 });
    expect(await raw.closed).toEqual({ code: 1012, reason: 'service restart' });
    // The handler was told; no answer went out for the abandoned call.
    await aborted.promise;
    expect(raw.frames).toEqual([NOTICE, PING]);
  });

  it('puts reconnectUrl in the notice', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await openRaw(res, url);
    raw.answerPings();
    await gateway.drain({ reconnectUrl: 'ws://other.example/rpc' });
    expect(raw.frames).toEqual([{ ...NOTICE, params: { url: 'ws://other.example/rpc' } }, PING]);
    expect((await raw.closed).code).toBe(1012);
  });

  it('a call the client sent before it read the notice is answered -32006, not dropped with the connection', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await openRaw(res, url);
    const draining = gateway.drain({ deadlineMs: 15_000 });
    await raw.until(() => raw.frames.some((f) => f.method === 'rpc.ping'), 'the ping');
    // What a client busy elsewhere does: its call goes out, then it reads the notice and the
    // ping, and answers the ping. Idle, the session would have been closed at the notice.
    raw.send({ jsonrpc: '2.0', method: 'sum', params: [1, 2], id: 'late' });
    const ping = raw.frames.find((f) => f.method === 'rpc.ping')!;
    raw.send({ jsonrpc: '2.0', result: 'pong', id: ping.id });
    expect(await raw.response('late')).toEqual({
      jsonrpc: '2.0',
      error: { code: ErrorCode.ShuttingDown, message: 'Server shutting down' },
      id: 'late',
    });
    expect(await raw.closed).toEqual({ code: 1012, reason: 'service restart' });
    await draining;
  });

  it('a client that never answers the ping holds its session to the deadline, then 1012', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await openRaw(res, url);
    await gateway.drain({ deadlineMs: 200 });
    expect(raw.frames).toEqual([NOTICE, PING]);
    expect(await raw.closed).toEqual({ code: 1012, reason: 'service restart' });
  });

  it('a client that answers no call at all is let go after DRAIN_PING_WAIT_MS, not held to the deadline', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await openRaw(res, url);
    const drained = gateway.drain({ deadlineMs: 600_000 }).then(() => 'drained');
    // Far past the 2 s wait, far short of the deadline.
    const outcome = await Promise.race([
      drained,
      new Promise((resolve) => setTimeout(() => resolve('still draining'), 30_000)),
    ]);
    expect(outcome).toBe('drained');
    expect(raw.frames).toEqual([NOTICE, PING]);
    expect(await raw.closed).toEqual({ code: 1012, reason: 'service restart' });
  }, 40_000);

  it("the gateway's own call to the client in flight is answered before the close", async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await openRaw(res, url);
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const session = [...gateway.sessions.values()][0]!;
    const asked = session.call('confirm', ['order 7']);
    await raw.until(() => raw.frames.some((f) => f.method === 'confirm'), 'the call');
    const draining = gateway.drain({ deadlineMs: 15_000 });
    await raw.until(() => raw.frames.some((f) => f.method === 'rpc.ping'), 'the ping');
    const confirm = raw.frames.find((f) => f.method === 'confirm')!;
    raw.send({ jsonrpc: '2.0', result: 'confirmed', id: confirm.id });
    const ping = raw.frames.find((f) => f.method === 'rpc.ping')!;
    raw.send({ jsonrpc: '2.0', result: 'pong', id: ping.id });
    expect(await asked).toBe('confirmed');
    expect((await raw.closed).code).toBe(1012);
    await draining;
  });

  it("the client's handler for the gateway's call in flight finishes; its answer arrives before the client leaves", async () => {
    const a = await res.demoGateway();
    const b = await res.demoGateway();
    const gate = deferred();
    const client = res.client([a.url, b.url]);
    client.method('confirm', async () => {
      await gate.promise;
      return 'confirmed';
    });
    await client.opened();
    await waitUntil(() => a.gateway.sessions.size === 1, 'the session');
    const session = [...a.gateway.sessions.values()][0]!;
    const asked = session.call('confirm');
    await waitUntil(() => session.peer.pendingCount === 1, 'the call out');
    const drained = a.gateway.drain({ reconnectUrl: b.url, deadlineMs: 15_000 });
    await waitForState(client, 'reconnecting');
    gate.resolve();
    expect(await asked).toBe('confirmed');
    await drained;
    await waitForState(client, 'open');
    expect(client.url).toBe(b.url);
  });

  it('an RpcClient with two URLs finishes its call, then moves to the second gateway where queued calls succeed', async () => {
    const gate = deferred();
    const a = await res.demoGateway();
    const b = await res.demoGateway();
    a.gateway.method('where', () => 'A');
    b.gateway.method('where', () => 'B');
    a.gateway.method('slow', async () => {
      await gate.promise;
      return 'A finished';
    });

    const client = res.client([a.url, b.url]);
    const { states } = recordStates(client);
    const notices: unknown[] = [];
    client.notifications$.subscribe((n) => notices.push(n));
    expect(await client.call('where')).toBe('A');
    const inFlight = client.call('slow');
    await waitUntil(
      () => [...a.gateway.sessions.values()].some((s) => s.peer.inFlightCount === 1),
      'the call to start',
    );

    const drained = a.gateway.drain({ reconnectUrl: b.url, deadlineMs: 15_000 });
    await waitForState(client, 'reconnecting');
    // Calls made now wait for the next connection instead of going to the draining one.
    const queued = [client.call('where'), client.call('sum', [20, 22])];
    expect(a.gateway.sessions.size).toBe(1);

    gate.resolve();
    expect(await inFlight).toBe('A finished');
    expect(await Promise.all(queued)).toEqual(['B', 42]);
    await drained;
    expect(client.url).toBe(b.url);
    expect(client.state).toBe('open');
    expect(b.gateway.sessions.size).toBe(1);
    expect(states).toEqual(['connecting', 'open', 'reconnecting', 'open']);
    // The reserved notice is handled by the client itself, not passed on.
    expect(notices).toEqual([]);
  });
});

describe('a call refused -32006 on a connection the server asked the client to leave', () => {
  it('is sent again on the next connection: the caller gets its result, never the refusal', async () => {
    const a = await res.demoGateway();
    const b = await res.demoGateway();
    a.gateway.method('where', () => 'A');
    b.gateway.method('where', () => 'B');
    // The session drains while its next call is already on the wire: read after the notice.
    a.gateway.method('leave', (_params, ctx) => {
      void ctx.session.drain({ reconnectUrl: b.url, deadlineMs: 15_000 });
      return 'leaving';
    });
    const client = res.client([a.url, b.url]);
    await client.opened();
    const [left, where, sum] = [
      client.call('leave'),
      client.call('where'),
      client.call('sum', [20, 22]),
    ];
    expect(await left).toBe('leaving');
    expect(await where).toBe('B');
    expect(await sum).toBe(42);
    expect(client.url).toBe(b.url);
  });

  it('a batch refused -32006 is not sent again: its calls get the refusal', async () => {
    const a = await res.demoGateway();
    const b = await res.demoGateway();
    a.gateway.method('leave', (_params, ctx) => {
      void ctx.session.drain({ reconnectUrl: b.url, deadlineMs: 15_000 });
      return 'leaving';
    });
    const client = res.client([a.url, b.url]);
    await client.opened();
    const left = client.call('leave');
    const batch = client.batch([
      { method: 'sum', params: [1, 2] },
      { method: 'sum', params: [3, 4] },
    ]);
    expect(await left).toBe('leaving');
    const results = await batch;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toMatchObject({
      code: ErrorCode.ShuttingDown,
    });
  });
});

describe('session.drain(): moving one client', () => {
  it('the drained client reconnects and resumes without loss; the other sessions stay', async () => {
    const { url, gateway } = await res.gateway();
    gateway.topic('feed');
    // A backoff far beyond the wait below: only the notice's reconnect-at-once brings it back.
    const moved = res.client(url, { reconnect: { initialDelayMs: 60_000, jitter: 0 } });
    await moved.opened();
    await waitUntil(() => gateway.sessions.size === 1, 'the first session');
    const movedSession = [...gateway.sessions.values()][0]!;
    const stays = res.client(url);
    await stays.opened();
    const movedSeqs: (number | null | undefined)[] = [];
    const staysSeqs: (number | null | undefined)[] = [];
    moved.subscribeWithMeta('feed').subscribe((e) => movedSeqs.push(e.gap ?? e.seq));
    stays.subscribeWithMeta('feed').subscribe((e) => staysSeqs.push(e.gap ?? e.seq));
    await waitUntil(() => gateway.pubsub.topics()['feed'] === 2, 'both subscriptions');
    const before = new Map(gateway.sessions);

    for (let n = 1; n <= 5; n++) await gateway.publish('feed', n);
    const drained = movedSession.drain();
    // Published while the drained client is away: replayed to it on its new session.
    for (let n = 6; n <= 10; n++) await gateway.publish('feed', n);
    await drained;
    expect(movedSession.isClosed).toBe(true);
    for (let n = 11; n <= 15; n++) await gateway.publish('feed', n);

    const all = Array.from({ length: 15 }, (_, i) => i + 1);
    await waitUntil(
      () => movedSeqs.length >= 15 && staysSeqs.length >= 15,
      'every message on both clients',
    );
    expect(movedSeqs).toEqual(all);
    expect(staysSeqs).toEqual(all);
    // Only the drained session was replaced.
    const after = [...gateway.sessions.keys()];
    expect(after).toHaveLength(2);
    expect(after.filter((id) => before.has(id))).toHaveLength(1);
    expect(after).not.toContain(movedSession.id);
  });
});
