import { describe, it, expect, vi, afterEach } from 'vitest';
import type { Observable } from 'rxjs';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import type { IncomingNotification } from '../../src/peer/peer.js';
import { ConnectionClosedError } from '../../src/protocol/local-errors.js';
import { settle } from '../support/peers.js';
import { cleanup, never, pair, watch } from './helpers.js';
import { deferred, rejectionOf } from '../support/promises.js';

afterEach(cleanup);

function recordNotifications(source: Observable<IncomingNotification>) {
  const state = { seen: [] as IncomingNotification[], completed: false };
  source.subscribe({
    next: (n) => state.seen.push(n),
    complete: () => {
      state.completed = true;
    },
  });
  return state;
}

describe('close', () => {
  it('settles everything on both sides', async () => {
    const { a, b } = pair();
    const aHandler = deferred<HandlerContext<string>>();
    const bHandler = deferred<HandlerContext<string>>();
    a.registry.method('hang', (_p, ctx) => {
      aHandler.resolve(ctx);
      return never();
    });
    b.registry.method('hang', (_p, ctx) => {
      bHandler.resolve(ctx);
      return never();
    });
    const notesA = recordNotifications(a.notifications$);
    const notesB = recordNotifications(b.notifications$);

    const aCall = rejectionOf(a.call('hang', [], { timeoutMs: 60_000 }));
    const bCall = rejectionOf(b.call('hang'));
    const aCtx = await aHandler.promise;
    const bCtx = await bHandler.promise;
    expect(a.pendingCount).toBe(1);
    expect(b.pendingCount).toBe(1);
    expect(a.inFlightCount).toBe(1);
    expect(b.inFlightCount).toBe(1);

    a.close(4000, 'bye');
    expect(a.isClosed).toBe(true);
    expect(a.pendingCount).toBe(0);
    expect(a.inFlightCount).toBe(0);
    expect(aCtx.signal.aborted).toBe(true);
    expect(aCtx.signal.reason).toBeInstanceOf(ConnectionClosedError);
    expect(notesA.completed).toBe(true);

    const errA = await aCall;
    expect(errA).toBeInstanceOf(ConnectionClosedError);
    expect(errA).toMatchObject({ closeCode: 4000, closeReason: 'bye' });

    const errB = await bCall;
    expect(errB).toBeInstanceOf(ConnectionClosedError);
    expect(errB).toMatchObject({ closeCode: 4000, closeReason: 'bye' });
    expect(b.isClosed).toBe(true);
    expect(b.pendingCount).toBe(0);
    expect(b.inFlightCount).toBe(0);
    expect(bCtx.signal.aborted).toBe(true);
    expect(notesB.completed).toBe(true);

    expect(await a.closed).toEqual({ code: 4000, reason: 'bye' });
    expect(await b.closed).toEqual({ code: 4000, reason: 'bye' });
  });

  it('a close from the transport (the other side went away) tears the peer down', async () => {
    const { a, b, tb } = pair();
    b.registry.method('hang', () => never());
    const call = rejectionOf(a.call('hang'));
    await settle();

    tb.close(1001, 'going away');
    expect(await a.closed).toEqual({ code: 1001, reason: 'going away' });
    expect(await b.closed).toEqual({ code: 1001, reason: 'going away' });
    expect(await call).toMatchObject({ closeCode: 1001, closeReason: 'going away' });
  });

  it('close() without arguments uses 1000 and an empty reason', async () => {
    const { a, b } = pair();
    a.close();
    expect(await a.closed).toEqual({ code: 1000, reason: '' });
    expect(await b.closed).toEqual({ code: 1000, reason: '' });
  });

  it('calls, batches and notifications after close fail with ConnectionClosedError', async () => {
    const { a, b, ta } = pair();
    a.close(4001, 'done');
    await b.closed;

    const callErr = await rejectionOf(a.call('anything', [1]));
    expect(callErr).toBeInstanceOf(ConnectionClosedError);
    expect(callErr).toMatchObject({ closeCode: 4001, closeReason: 'done' });
    expect(await rejectionOf(b.call('anything'))).toBeInstanceOf(ConnectionClosedError);
    expect(await rejectionOf(a.batch([{ method: 'x' }]))).toBeInstanceOf(ConnectionClosedError);

    expect(() => a.notify('tick', [1])).toThrow(ConnectionClosedError);
    expect(() => b.notify('tick')).toThrow(ConnectionClosedError);
    expect(ta.sent).toEqual([]);
    expect(a.pendingCount).toBe(0);
  });

  it('close is idempotent: the second close changes nothing', async () => {
    const { a } = pair();
    a.close(4000, 'first');
    a.close(4002, 'second');
    expect(await a.closed).toEqual({ code: 4000, reason: 'first' });
    expect(await rejectionOf(a.call('x'))).toMatchObject({ closeCode: 4000 });
  });

  it('a handler that finishes after close sends no reply', async () => {
    const { a, b, tb } = pair();
    const gate = deferred<string>();
    const failGate = deferred<string>();
    b.registry.method('slow', () => gate.promise);
    b.registry.method('slowFail', () => failGate.promise);
    const outcomes = [rejectionOf(a.call('slow')), rejectionOf(a.call('slowFail'))];
    await settle();

    b.close();
    gate.resolve('late');
    failGate.reject(new Error('late'));
    await settle();
    expect(tb.sent).toEqual([]);
    for (const err of await Promise.all(outcomes))
      expect(err).toBeInstanceOf(ConnectionClosedError);
  });

  it('incoming frames after close are ignored', async () => {
    const { a, b, ta } = pair();
    const handler = vi.fn(() => 1);
    a.registry.method('m', handler);
    a.close();
    a.receive('{"jsonrpc":"2.0","method":"m","id":1}');
    await settle();
    expect(handler).not.toHaveBeenCalled();
    expect(ta.sent).toEqual([]);
    await b.closed;
  });

  it('leaves no timer behind even though timed calls were pending', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { a, b } = pair({ callTimeoutMs: 30_000 }, { callTimeoutMs: 5_000 });
    a.registry.method('hang', () => never());
    b.registry.method('hang', () => never());

    const outcomes = [
      rejectionOf(a.call('hang', [], { timeoutMs: 10_000 })),
      rejectionOf(a.call('hang')),
      rejectionOf(a.call('hang', [], { timeoutMs: 1, signal: new AbortController().signal })),
      rejectionOf(b.call('hang')),
    ];
    const unbounded = watch(a.call('hang', [], { timeoutMs: 0 }));
    await settle();
    // One deadline timer per peer's table of calls: a's three timed calls and b's one.
    expect(vi.getTimerCount()).toBe(2);

    a.close(4000, 'bye');
    await settle();
    expect(vi.getTimerCount()).toBe(0);
    for (const err of await Promise.all(outcomes))
      expect(err).toBeInstanceOf(ConnectionClosedError);
    expect(unbounded.settled).toBe(true);
    expect(unbounded.outcome).toBeInstanceOf(ConnectionClosedError);

    // Nothing fires later either.
    vi.advanceTimersByTime(60_000);
    await settle();
  });

  it('a pending call whose signal aborts after close is not cancelled twice and sends nothing', async () => {
    const { a, b, ta } = pair();
    b.registry.method('hang', () => never());
    const controller = new AbortController();
    const outcome = rejectionOf(a.call('hang', [], { signal: controller.signal }));
    await settle();
    a.close();
    controller.abort();
    expect(await outcome).toBeInstanceOf(ConnectionClosedError);
    expect(ta.sent).toHaveLength(1);
  });

  it('notification subscriptions made after close complete at once', () => {
    const { a } = pair();
    a.close();
    const late = recordNotifications(a.notifications$);
    let lateOfCompleted = false;
    a.notificationsOf('x').subscribe({ complete: () => (lateOfCompleted = true) });
    expect(late.completed).toBe(true);
    expect(lateOfCompleted).toBe(true);
  });
});

describe('whenIdle', () => {
  it('calls every waiter once no handler runs, or at the close, and each once', async () => {
    const { a, b } = pair();
    const run = deferred<string>();
    b.registry.method('work', () => run.promise);
    const answer = a.call('work');
    await settle();
    const called: string[] = [];
    b.whenIdle(() => called.push('first'));
    b.whenIdle(() => called.push('second'));
    await settle();
    expect(called).toEqual([]);
    run.resolve('done');
    expect(await answer).toBe('done');
    await settle();
    expect(called).toEqual(['first', 'second']);

    // A handler still running at the close: the waiters are let go by the close.
    b.registry.method('hang', never);
    void a.call('hang').catch(() => undefined);
    await settle();
    b.whenIdle(() => called.push('third'));
    b.whenIdle(() => called.push('fourth'));
    await settle();
    b.close();
    await settle();
    expect(called).toEqual(['first', 'second', 'third', 'fourth']);
  });
});
