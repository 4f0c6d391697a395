import { NEVER } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, JsonRpcError, TooManyPendingCallsError } from '../../src/index.js';
import type { GatewayLimits } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';
import type { RawRpc, WireFrame } from '../support/raw-rpc.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const RATE_LIMITED = { code: ErrorCode.RateLimited, message: 'Rate limit exceeded' };

/** A gateway with `sum` and a `note` notification handler that counts. */
async function limitedGateway(limits: GatewayLimits) {
  const running = await res.demoGateway({ limits });
  const notes: unknown[] = [];
  running.gateway.method('note', (params) => void notes.push(params));
  return { ...running, notes };
}

/** Send `count` sum requests in one synchronous burst (ids 1..count) and collect the replies by id. */
async function burst(raw: RawRpc, count: number): Promise<WireFrame[]> {
  const ids = Array.from({ length: count }, () => raw.nextId());
  for (const id of ids) raw.send({ jsonrpc: '2.0', method: 'sum', params: [id], id });
  return Promise.all(ids.map((id) => raw.response(id)));
}

describe('rate limit (token bucket per connection)', () => {
  // A refill of one token per 1 000 s: nothing refills while a test runs.
  const NO_REFILL = 0.001;

  it('the request after the burst gets -32003 while the earlier ones succeed; the connection stays open', async () => {
    const { url } = await limitedGateway({ ratePerSecond: NO_REFILL, rateBurst: 4 });
    const raw = await openRaw(res, url);
    const replies = await burst(raw, 6);
    expect(replies.map((r) => r.result ?? r.error)).toEqual([
      1,
      2,
      3,
      4,
      RATE_LIMITED,
      RATE_LIMITED,
    ]);
    expect(raw.socket.readyState).toBe(WebSocket.OPEN);
    expect((await raw.request('sum', [1])).error).toEqual(RATE_LIMITED);

    // The bucket is per connection: a second one starts full.
    const other = await openRaw(res, url);
    expect((await burst(other, 4)).map((r) => r.result)).toEqual([1, 2, 3, 4]);
  });

  it('batch members count one by one', async () => {
    const { url } = await limitedGateway({ ratePerSecond: NO_REFILL, rateBurst: 3 });
    const raw = await openRaw(res, url);
    raw.send(
      [1, 2, 3, 4, 5].map((id) => ({ jsonrpc: '2.0', method: 'sum', params: [id * 10], id })),
    );
    await raw.until(() => raw.frames.length === 1, 'the batch reply');
    const reply = raw.frames[0] as unknown as WireFrame[];
    expect(reply.map((r) => [r.id, r.result ?? r.error])).toEqual([
      [1, 10],
      [2, 20],
      [3, 30],
      [4, RATE_LIMITED],
      [5, RATE_LIMITED],
    ]);
  });

  it('notifications take tokens too and are dropped silently beyond the burst', async () => {
    const { url, notes } = await limitedGateway({ ratePerSecond: NO_REFILL, rateBurst: 3 });
    const raw = await openRaw(res, url);
    for (const n of [1, 2, 3, 4]) raw.send({ jsonrpc: '2.0', method: 'note', params: [n] });
    const after = await raw.request('sum', [1]);
    expect(after.error).toEqual(RATE_LIMITED);
    expect(notes).toEqual([[1], [2], [3]]);
    // Nothing but the request's reply: a dropped notification is not answered.
    expect(raw.frames).toHaveLength(1);
  });

  it('ratePerSecond: 0 disables the limit', async () => {
    const { url, notes } = await limitedGateway({ ratePerSecond: 0, rateBurst: 1 });
    const raw = await openRaw(res, url);
    const replies = await burst(raw, 300);
    expect(replies.every((r, i) => r.result === i + 1)).toBe(true);
    raw.send(
      Array.from({ length: 50 }, (_, i) => ({ jsonrpc: '2.0', method: 'note', params: [i] })),
    );
    await raw.barrier();
    expect(notes).toHaveLength(50);
  });

  it('tokens refill over time', async () => {
    const { url } = await limitedGateway({ ratePerSecond: 5, rateBurst: 1 });
    const raw = await openRaw(res, url);
    // Both members are taken in the same synchronous pass: the second finds the bucket empty.
    raw.send([
      { jsonrpc: '2.0', method: 'sum', params: [1], id: 'a' },
      { jsonrpc: '2.0', method: 'sum', params: [2], id: 'b' },
    ]);
    await raw.until(() => raw.frames.length === 1, 'the batch reply');
    const reply = raw.frames[0] as unknown as WireFrame[];
    expect(reply.map((r) => r.result ?? r.error)).toEqual([1, RATE_LIMITED]);
    // A refused request takes no token, so retrying until the refill lets one through is fair.
    for (let attempt = 0; ; attempt++) {
      const frame = await raw.request('sum', [7]);
      if (frame.result !== undefined) {
        expect(frame.result).toBe(7);
        break;
      }
      expect(frame.error).toEqual(RATE_LIMITED);
      if (attempt > 100) throw new Error('the bucket never refilled');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
});

describe('maxInFlight', () => {
  it('beyond it calls get -32000 {maxInFlight}; the server keeps reading (answers busy rather than stops)', async () => {
    const gate = deferred();
    const { url, gateway } = await res.demoGateway({ limits: { maxInFlight: 2 } });
    gateway.method('slow', async (params, ctx) => {
      await Promise.race([gate.promise, untilAborted(ctx.signal)]);
      return params;
    });
    const raw = await openRaw(res, url);
    raw.send({ jsonrpc: '2.0', method: 'slow', params: ['a'], id: 's1' });
    raw.send({ jsonrpc: '2.0', method: 'slow', params: ['b'], id: 's2' });
    raw.send({ jsonrpc: '2.0', method: 'slow', params: ['c'], id: 's3' });
    expect(await raw.response('s3')).toEqual({
      jsonrpc: '2.0',
      error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 2 } },
      id: 's3',
    });
    // While saturated, every further call is refused at once (even a synchronous one)...
    expect((await raw.request('sum', [1, 2])).error?.code).toBe(ErrorCode.ServerBusy);
    // ...but the socket is still read: pings are answered and a cancellation gets through.
    await raw.barrier();
    raw.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 's1' } });
    expect((await raw.response('s1')).error?.code).toBe(ErrorCode.RequestCancelled);
    // The cancelled call freed a slot.
    expect((await raw.request('sum', [1, 2])).result).toBe(3);

    gate.resolve();
    expect((await raw.response('s2')).result).toEqual(['b']);
    const [session] = [...gateway.sessions.values()];
    expect(session!.peer.inFlightCount).toBe(0);
    const again = await Promise.all([raw.request('slow', ['d']), raw.request('slow', ['e'])]);
    expect(again.map((r) => r.result)).toEqual([['d'], ['e']]);
  });
});

describe('maxPendingCalls (server-to-client calls)', () => {
  it('a call beyond the limit rejects locally with TooManyPendingCallsError; a settled one frees its slot', async () => {
    const { url, gateway } = await res.demoGateway({ limits: { maxPendingCalls: 1 } });
    const client = res.client(url);
    const answer = deferred<string>();
    const asked: unknown[] = [];
    client.method('client.ask', async (params) => {
      const [text] = params as [string];
      asked.push(text);
      return text === 'first' ? answer.promise : `re: ${text}`;
    });
    await client.opened();
    const [session] = [...gateway.sessions.values()];

    const first = session!.call('client.ask', ['first']);
    const refused = await rejectionOf(session!.call('client.ask', ['second']));
    expect(refused).toBeInstanceOf(TooManyPendingCallsError);
    expect(refused).not.toBeInstanceOf(JsonRpcError);
    expect(refused).toMatchObject({ limit: 1 });
    expect(session!.peer.pendingCount).toBe(1);

    answer.resolve('yes');
    expect(await first).toBe('yes');
    expect(await session!.call('client.ask', ['third'])).toBe('re: third');
    // The refused call never reached the client.
    expect(asked).toEqual(['first', 'third']);
  });
});

describe('maxSubscriptions', () => {
  it('a subscribe beyond the limit gets -32005 {limit}; topics and streams share it; unsubscribing frees a slot', async () => {
    const { url, gateway } = await res.gateway({ limits: { maxSubscriptions: 2 } });
    for (const topic of ['a', 'b', 'c']) gateway.topic(topic);
    gateway.stream('ticks', () => NEVER);
    const raw = await openRaw(res, url);

    const a = await raw.request('subscribe', ['a']);
    const b = await raw.request('subscribe', ['b']);
    expect(typeof a.result).toBe('string');
    expect(typeof b.result).toBe('string');
    const tooMany = {
      code: ErrorCode.TooManySubscriptions,
      message: 'Too many subscriptions',
      data: { limit: 2 },
    };
    expect((await raw.request('subscribe', ['c'])).error).toEqual(tooMany);
    expect((await raw.request('subscribe', ['ticks'])).error).toEqual(tooMany);
    expect(gateway.pubsub.topics()).toEqual({ a: 1, b: 1 });

    expect((await raw.request('unsubscribe', [a.result])).result).toBe(true);
    const c = await raw.request('subscribe', ['c']);
    expect(typeof c.result).toBe('string');
    expect(gateway.pubsub.topics()).toEqual({ b: 1, c: 1 });
    // The limit is per connection.
    const other = await openRaw(res, url);
    expect(typeof (await other.request('subscribe', ['a'])).result).toBe('string');
  });
});
