import { describe, it, expect, vi, afterEach } from 'vitest';
import { firstValueFrom, take, toArray } from 'rxjs';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { notification } from '../../src/peer/method-descriptor.js';
import type { IncomingNotification } from '../../src/peer/peer.js';
import { settle } from '../support/peers.js';
import { capturingLogger, cleanup, pair } from './helpers.js';
import { deferred } from '../support/promises.js';

afterEach(cleanup);

const Progress = notification<{ percent: number }>('progress');

describe('notifications', () => {
  it('notifications$ sees every notification from the other side, but no rpc.* ones', async () => {
    const onReserved = vi.fn();
    const { a, b } = pair({}, { onReservedNotification: onReserved });
    const seen: IncomingNotification[] = [];
    b.notifications$.subscribe((n) => seen.push(n));

    a.notify('tick', [1]);
    a.notify('rpc.reconnect', { url: 'ws://elsewhere' });
    a.notify('news', { headline: 'hi' });
    a.notify('rpc.cancel', { id: 5 });
    a.notify('bare');
    await settle();

    expect(seen).toEqual([
      { method: 'tick', params: [1] },
      { method: 'news', params: { headline: 'hi' } },
      { method: 'bare', params: undefined },
    ]);
    // Reserved ones other than cancel go to the layer above instead.
    expect(onReserved).toHaveBeenCalledTimes(1);
    expect(onReserved).toHaveBeenCalledWith('rpc.reconnect', { url: 'ws://elsewhere' });
  });

  it('works from b to a as well, with one frame per notification and no reply', async () => {
    const { a, b, ta, tb } = pair();
    const seen: IncomingNotification[] = [];
    a.notifications$.subscribe((n) => seen.push(n));

    b.notify(Progress, { percent: 50 });
    await settle();
    expect(seen).toEqual([{ method: 'progress', params: { percent: 50 } }]);
    expect(tb.sent).toEqual(['{"jsonrpc":"2.0","method":"progress","params":{"percent":50}}']);
    expect(ta.sent).toEqual([]);
  });

  it('notificationsOf filters by name (string or descriptor) and yields the params', async () => {
    const { a, b } = pair();
    const byDescriptor: { percent: number }[] = [];
    const byName: unknown[] = [];
    b.notificationsOf(Progress).subscribe((p) => byDescriptor.push(p));
    b.notificationsOf('tick').subscribe((p) => byName.push(p));

    a.notify('tick', [1]);
    a.notify(Progress, { percent: 10 });
    a.notify('other', [0]);
    a.notify('tick', { n: 2 });
    a.notify(Progress, { percent: 20 });
    await settle();

    expect(byDescriptor).toEqual([{ percent: 10 }, { percent: 20 }]);
    expect(byName).toEqual([[1], { n: 2 }]);
  });

  it('notificationsOf completes on close', async () => {
    const { a, b } = pair();
    const all = firstValueFrom(b.notificationsOf<[number]>('n').pipe(toArray()));
    a.notify('n', [1]);
    a.notify('n', [2]);
    await settle();
    a.close();
    expect(await all).toEqual([[1], [2]]);
  });

  it('a notification of a registered method runs the handler as well and is never answered', async () => {
    const { a, b, tb } = pair();
    const ran = deferred<{ params: unknown; ctx: HandlerContext<string> }>();
    const handler = vi.fn((params: unknown, ctx: HandlerContext<string>) => {
      ran.resolve({ params, ctx });
      return 'ignored result';
    });
    b.registry.method('log', handler);
    const seen = firstValueFrom(b.notifications$.pipe(take(1)));

    a.notify('log', ['hello']);
    const { params, ctx } = await ran.promise;
    expect(params).toEqual(['hello']);
    expect(ctx.id).toBeUndefined();
    expect(ctx.method).toBe('log');
    expect(ctx.session).toBe('b');
    expect(await seen).toEqual({ method: 'log', params: ['hello'] });
    await settle();
    expect(handler).toHaveBeenCalledTimes(1);
    expect(tb.sent).toEqual([]);
  });

  it('an async notification handler is not answered either', async () => {
    const { a, b, tb } = pair();
    const done = deferred();
    b.registry.method('work', async () => {
      await settle(1);
      done.resolve();
      return 42;
    });
    a.notify('work');
    await done.promise;
    await settle();
    expect(tb.sent).toEqual([]);
    expect(b.inFlightCount).toBe(0);
  });

  it('a throwing notification handler neither crashes the peer nor replies; it is logged', async () => {
    const logger = capturingLogger();
    const { a, b, tb } = pair({}, { logger });
    b.registry.method('syncThrow', () => {
      throw new Error('sync failure');
    });
    b.registry.method('asyncThrow', () => Promise.reject(new Error('async failure')));
    b.registry.method('ok', () => 'still fine');
    const seen: string[] = [];
    b.notifications$.subscribe((n) => seen.push(n.method));

    a.notify('syncThrow');
    a.notify('asyncThrow');
    await settle();

    expect(tb.sent).toEqual([]);
    expect(b.isClosed).toBe(false);
    expect(b.inFlightCount).toBe(0);
    expect(seen).toEqual(['syncThrow', 'asyncThrow']);
    const warns = logger.at('warn');
    expect(warns).toHaveLength(2);
    expect(warns.map((w) => (w.obj as { method: string }).method).sort()).toEqual([
      'asyncThrow',
      'syncThrow',
    ]);
    expect(await a.call('ok')).toBe('still fine');
  });

  it('a notification handler running at close sees its signal abort', async () => {
    const { a, b } = pair();
    const started = deferred<HandlerContext<string>>();
    b.registry.method('long', (_p, ctx) => {
      started.resolve(ctx);
      return new Promise<void>(() => undefined);
    });
    a.notify('long');
    const ctx = await started.promise;
    expect(b.inFlightCount).toBe(1);
    b.close();
    expect(ctx.signal.aborted).toBe(true);
  });
});
