import { describe, it, expect, vi, afterEach } from 'vitest';
import { InvalidParamsError, MethodNotFoundError } from '../../src/protocol/errors.js';
import { settle } from '../support/peers.js';
import { cleanup, frames, pair, raw } from './helpers.js';
import { deferred } from '../support/promises.js';

afterEach(cleanup);

describe('outgoing batches', () => {
  it('a.batch settles one result per entry, in order, over exactly one array frame', async () => {
    const { a, b, ta, tb } = pair();
    const logged: unknown[] = [];
    b.registry.method('add', ([x, y]: readonly number[]) => x! + y!);
    b.registry.method('log', (params) => {
      logged.push(params);
    });
    b.registry.method('fail', () => {
      throw new InvalidParamsError('no', { why: 'because' });
    });
    b.registry.method('echo', (params) => Promise.resolve(params));

    const results = await a.batch([
      { method: 'add', params: [1, 2] },
      { method: 'log', params: ['x'], notification: true },
      { method: 'fail' },
      { method: 'missing' },
      { method: 'echo', params: { v: 1 } },
    ]);

    expect(results).toHaveLength(5);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 3 });
    expect(results[1]).toEqual({ status: 'fulfilled', value: undefined });
    expect(results[2]!.status).toBe('rejected');
    const failReason = (results[2] as PromiseRejectedResult).reason;
    expect(failReason).toBeInstanceOf(InvalidParamsError);
    expect(failReason).toMatchObject({ code: -32602, message: 'no', data: { why: 'because' } });
    expect(results[3]!.status).toBe('rejected');
    expect((results[3] as PromiseRejectedResult).reason).toBeInstanceOf(MethodNotFoundError);
    expect(results[4]).toEqual({ status: 'fulfilled', value: { v: 1 } });
    expect(logged).toEqual([['x']]);

    // One array frame out, one array frame back (without an entry for the notification).
    expect(ta.sent).toHaveLength(1);
    const out = frames(ta)[0];
    expect(Array.isArray(out)).toBe(true);
    expect(out).toHaveLength(5);
    expect(out[1]).toEqual({ jsonrpc: '2.0', method: 'log', params: ['x'] });
    const ids = out.filter((m: { id?: unknown }) => 'id' in m).map((m: { id: unknown }) => m.id);
    expect(new Set(ids).size).toBe(4);
    expect(tb.sent).toHaveLength(1);
    const back = frames(tb)[0];
    expect(Array.isArray(back)).toBe(true);
    expect(back.map((r: { id: unknown }) => r.id).sort()).toEqual([...ids].sort());
    expect(a.pendingCount).toBe(0);
  });

  it('b.batch works in the other direction too', async () => {
    const { a, b, tb } = pair();
    a.registry.method('double', ([n]: readonly number[]) => n! * 2);

    const results = await b.batch([
      { method: 'double', params: [2] },
      { method: 'nope' },
      { method: 'double', params: [5] },
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[0] as PromiseFulfilledResult<unknown>).value).toBe(4);
    expect((results[2] as PromiseFulfilledResult<unknown>).value).toBe(10);
    expect(tb.sent).toHaveLength(1);
    expect(Array.isArray(frames(tb)[0])).toBe(true);
  });

  it('a batch of notifications only gets no reply at all', async () => {
    const { a, b, ta, tb } = pair();
    const handler = vi.fn();
    b.registry.method('n', handler);
    const seen: string[] = [];
    b.notifications$.subscribe((n) => seen.push(n.method));

    const results = await a.batch([
      { method: 'n', params: [1], notification: true },
      { method: 'm', notification: true },
    ]);
    expect(results).toEqual([
      { status: 'fulfilled', value: undefined },
      { status: 'fulfilled', value: undefined },
    ]);
    await settle();
    expect(ta.sent).toHaveLength(1);
    expect(tb.sent).toEqual([]);
    expect(handler).toHaveBeenCalledTimes(1);
    expect(seen).toEqual(['n', 'm']);
  });

  it('an empty batch sends nothing', async () => {
    const { a, ta } = pair();
    expect(await a.batch([])).toEqual([]);
    expect(ta.sent).toEqual([]);
  });

  it('a member whose params cannot be written fails the batch, every opened call settled and awaited', async () => {
    const { a } = pair();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const sent = a.batch([
        { method: 'one', params: [1] },
        { method: 'two', params: [BigInt(2)] as unknown as number[] },
      ]);
      await expect(sent).rejects.toThrow(TypeError);
      expect(a.pendingCount).toBe(0);
      // Unhandled rejections are reported a turn after the microtasks run out.
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('batch options apply to every call in it (timeout)', async () => {
    const { a, b } = pair();
    b.registry.method('hang', () => new Promise(() => undefined));
    b.registry.method('ok', () => 'ok');
    const results = await a.batch([{ method: 'ok' }, { method: 'hang' }], { timeoutMs: 20 });
    // The reply is one frame, sent after the slowest member: so both time out here.
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(a.pendingCount).toBe(0);
  });
});

describe('incoming batches', () => {
  it('members run concurrently and the one array reply waits for all of them', async () => {
    const { a, b, tb } = pair();
    const firstStarted = deferred();
    const secondStarted = deferred();
    b.registry.method('first', async () => {
      firstStarted.resolve();
      await secondStarted.promise;
      return 'first done';
    });
    b.registry.method('second', async () => {
      secondStarted.resolve();
      await firstStarted.promise;
      return 'second done';
    });

    // If the members ran one after the other, each would wait for the other forever
    // and the 2 s guard would turn the results into TimeoutErrors.
    const results = await a.batch([{ method: 'first' }, { method: 'second' }], {
      timeoutMs: 2_000,
    });
    expect(results).toEqual([
      { status: 'fulfilled', value: 'first done' },
      { status: 'fulfilled', value: 'second done' },
    ]);
    expect(tb.sent).toHaveLength(1);
    expect(frames(tb)[0]).toHaveLength(2);
  });

  it('no member reply is sent before the slowest member finishes', async () => {
    const { a, b, tb } = pair();
    const gate = deferred<string>();
    b.registry.method('fast', () => 'fast');
    b.registry.method('slow', () => gate.promise);

    const pending = a.batch([{ method: 'fast' }, { method: 'slow' }, { method: 'unknown' }]);
    await settle();
    expect(tb.sent).toEqual([]);

    gate.resolve('slow');
    const results = await pending;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect(tb.sent).toHaveLength(1);
    expect(frames(tb)[0]).toHaveLength(3);
  });

  it('a raw batch of sync and async requests is answered with one array in member order', async () => {
    const r = raw();
    r.peer.registry.method('sync', () => 'S');
    r.peer.registry.method('async', () => Promise.resolve('A'));

    const replies = await r.send(
      '[{"jsonrpc":"2.0","method":"async","id":1},' +
        '{"jsonrpc":"2.0","method":"sync","id":2},' +
        '{"jsonrpc":"2.0","method":"sync"},' +
        '{"jsonrpc":"2.0","method":"nope","id":"x"},' +
        '42]',
    );
    expect(replies).toHaveLength(1);
    expect(JSON.parse(replies[0]!)).toEqual([
      { jsonrpc: '2.0', result: 'A', id: 1 },
      { jsonrpc: '2.0', result: 'S', id: 2 },
      { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id: 'x' },
      { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request' }, id: null },
    ]);
  });

  it('a raw batch of responses only produces no reply', async () => {
    const r = raw();
    const replies = await r.send(
      '[{"jsonrpc":"2.0","result":1,"id":1},{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":2}]',
    );
    expect(replies).toEqual([]);
    expect(r.peer.isClosed).toBe(false);
  });

  it('an incoming batch member can be cancelled and the rest still answer', async () => {
    const r = raw();
    r.peer.registry.method(
      'stoppable',
      (_p, ctx) =>
        new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped'))),
    );
    r.peer.registry.method('ok', () => 'ok');
    const replies = r.send(
      '[{"jsonrpc":"2.0","method":"stoppable","id":7},{"jsonrpc":"2.0","method":"ok","id":8}]',
    );
    await settle(1);
    await r.send('{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":7}}');
    await replies;
    expect(r.received).toHaveLength(1);
    expect(JSON.parse(r.received[0]!)).toEqual([
      { jsonrpc: '2.0', error: { code: -32001, message: 'Request cancelled' }, id: 7 },
      { jsonrpc: '2.0', result: 'ok', id: 8 },
    ]);
  });
});
