import { describe, it, expect, vi, afterEach } from 'vitest';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import {
  CancelledError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../src/protocol/local-errors.js';
import { settle } from '../support/peers.js';
import { capturingLogger, cleanup, frames, never, pair, watch } from './helpers.js';
import { deferred, rejectionOf } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';

afterEach(cleanup);

const cancelFrame = (id: unknown) =>
  `{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":${JSON.stringify(id)}}}`;

describe('timeouts', () => {
  it('a per-call timeout rejects with TimeoutError', async () => {
    const { a, b } = pair();
    b.registry.method('hang', () => never());

    const err = await rejectionOf(a.call('hang', [], { timeoutMs: 20 }));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ method: 'hang', timeoutMs: 20 });
    expect(a.pendingCount).toBe(0);
  });

  it('the default callTimeoutMs applies when the call gives none', async () => {
    const { a, b } = pair({ callTimeoutMs: 20 });
    b.registry.method('hang', () => never());

    const err = await rejectionOf(a.call('hang'));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ method: 'hang', timeoutMs: 20 });
  });

  it('b’s calls to a time out as well', async () => {
    const { a, b } = pair({}, { callTimeoutMs: 20 });
    a.registry.method('hang', () => never());
    expect(await rejectionOf(b.call('hang'))).toBeInstanceOf(TimeoutError);
  });

  it('fires exactly at the timeout under fake timers, not before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { a, b } = pair({ callTimeoutMs: 1_000 });
    b.registry.method('hang', () => never());

    const state = watch(a.call('hang'));
    await settle();
    vi.advanceTimersByTime(999);
    await settle();
    expect(state.settled).toBe(false);
    vi.advanceTimersByTime(1);
    await settle();
    expect(state.settled).toBe(true);
    expect(state.outcome).toBeInstanceOf(TimeoutError);
  });

  it('a per-call timeout overrides callTimeoutMs, and 0 waits forever', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { a, b } = pair({ callTimeoutMs: 1_000 });
    b.registry.method('hang', () => never());

    const longer = watch(a.call('hang', [], { timeoutMs: 5_000 }));
    const forever = watch(a.call('hang', [], { timeoutMs: 0 }));
    await settle();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(4_999);
    await settle();
    expect(longer.settled).toBe(false);
    vi.advanceTimersByTime(1);
    await settle();
    expect(longer.outcome).toBeInstanceOf(TimeoutError);
    expect((longer.outcome as TimeoutError).timeoutMs).toBe(5_000);

    vi.advanceTimersByTime(10_000_000);
    await settle();
    expect(forever.settled).toBe(false);
    expect(a.pendingCount).toBe(1);
  });

  it('a response that beats the timeout leaves a timer that fires once for nothing', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { a, b, ta } = pair({ callTimeoutMs: 1_000 });
    b.registry.method('fast', () => 'ok');

    const p = a.call('fast');
    expect(vi.getTimerCount()).toBe(1);
    expect(await p).toBe('ok');
    // Kept for the next call rather than cleared and armed again per call.
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(1_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(ta.sent.some((frame) => frame.includes('rpc.cancel'))).toBe(false);
  });

  it('a late response after a timeout is dropped quietly and logged at debug', async () => {
    const logger = capturingLogger();
    const { a, b, ta, tb } = pair({ logger });
    const gate = deferred<string>();
    b.registry.method('slow', () => gate.promise);

    const err = await rejectionOf(a.call('slow', [], { timeoutMs: 20 }));
    expect(err).toBeInstanceOf(TimeoutError);
    const id = frames(ta)[0].id;

    await settle();
    // The timeout told b to stop (rpc.cancel), so b's late answer is the cancellation error.
    expect(ta.sent[1]).toBe(cancelFrame(id));
    gate.resolve('too late');
    await settle();
    // b did answer; a dropped it.
    expect(tb.sent).toEqual([
      `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Request cancelled"},"id":${id}}`,
    ]);
    expect(a.isClosed).toBe(false);
    expect(logger.at('debug')).toEqual([
      expect.objectContaining({ obj: { id }, msg: expect.stringMatching(/late response/) }),
    ]);
    expect(logger.at('warn')).toEqual([]);
    expect(logger.at('error')).toEqual([]);
    // The peer still works afterwards.
    b.registry.method('ping2', () => 'pong2');
    expect(await a.call('ping2')).toBe('pong2');
  });

  it('a late error response after a timeout is dropped and logged at debug too', async () => {
    const logger = capturingLogger();
    const { a, b } = pair({ logger });
    const gate = deferred<string>();
    b.registry.method('slow', () => gate.promise);

    expect(await rejectionOf(a.call('slow', [], { timeoutMs: 20 }))).toBeInstanceOf(TimeoutError);
    gate.reject(new JsonRpcError(7, 'late failure'));
    await settle();
    expect(logger.at('debug')).toHaveLength(1);
    expect(logger.at('warn')).toEqual([]);
  });
});

describe('cancellation', () => {
  function slowHandler() {
    const started = deferred<HandlerContext<string>>();
    let signalAborted: Deferred<unknown> | undefined;
    const handler = (_params: unknown, ctx: HandlerContext<string>): Promise<string> => {
      started.resolve(ctx);
      signalAborted = deferred<unknown>();
      const done = signalAborted;
      ctx.signal.addEventListener('abort', () => done.resolve(ctx.signal.reason));
      return never<string>();
    };
    return { started, handler, aborted: () => signalAborted!.promise };
  }

  it('aborting rejects with CancelledError, sends rpc.cancel and aborts the handler’s signal', async () => {
    const { a, b, ta } = pair();
    const slow = slowHandler();
    b.registry.method('slow', slow.handler);
    const controller = new AbortController();

    const outcome = rejectionOf(a.call('slow', [1], { signal: controller.signal }));
    const ctx = await slow.started.promise;
    expect(ctx.signal.aborted).toBe(false);
    const id = frames(ta)[0].id;

    controller.abort('user gave up');
    const err = await outcome;
    expect(err).toBeInstanceOf(CancelledError);
    expect(err).toMatchObject({ method: 'slow', reason: 'user gave up' });
    expect(a.pendingCount).toBe(0);
    expect(ta.sent).toHaveLength(2);
    expect(ta.sent[1]).toBe(cancelFrame(id));

    await slow.aborted();
    expect(ctx.signal.aborted).toBe(true);
  });

  it('works from b to a, and a handler that reads ctx.signal only after the cancel sees it aborted', async () => {
    const { a, b, tb } = pair();
    const started = deferred<HandlerContext<string>>();
    a.registry.method('slow', (_p, ctx) => {
      started.resolve(ctx); // does not touch ctx.signal yet
      return never();
    });
    const controller = new AbortController();

    const outcome = rejectionOf(b.call('slow', { x: 1 }, { signal: controller.signal }));
    const ctx = await started.promise;
    controller.abort();
    expect(await outcome).toBeInstanceOf(CancelledError);
    expect(tb.sent.at(-1)).toBe(cancelFrame(ctx.id));
    await settle();
    expect(ctx.signal.aborted).toBe(true);
  });

  it('a handler that stops on cancel answers -32001, which the caller drops at debug level', async () => {
    const logger = capturingLogger();
    const { a, b, tb } = pair({ logger });
    b.registry.method(
      'stoppable',
      (_p, ctx) =>
        new Promise<string>((resolve) =>
          ctx.signal.addEventListener('abort', () => resolve('stopped')),
        ),
    );
    const controller = new AbortController();
    const outcome = rejectionOf(a.call('stoppable', [], { signal: controller.signal }));
    await settle();
    expect(b.inFlightCount).toBe(1);

    controller.abort();
    expect(await outcome).toBeInstanceOf(CancelledError);
    await settle();
    expect(b.inFlightCount).toBe(0);
    expect(frames(tb)).toEqual([
      { jsonrpc: '2.0', error: { code: -32001, message: 'Request cancelled' }, id: 1 },
    ]);
    expect(logger.at('debug')).toHaveLength(1);
    expect(logger.at('warn')).toEqual([]);
  });

  it('an already-aborted signal rejects at once and sends nothing', async () => {
    const { a, b, ta } = pair();
    const handler = vi.fn(() => 'ran');
    b.registry.method('m', handler);
    const controller = new AbortController();
    controller.abort('before');

    const err = await rejectionOf(a.call('m', [], { signal: controller.signal }));
    expect(err).toBeInstanceOf(CancelledError);
    expect(err).toMatchObject({ method: 'm', reason: 'before' });
    expect(a.pendingCount).toBe(0);
    await settle();
    expect(ta.sent).toEqual([]);
    expect(handler).not.toHaveBeenCalled();
  });

  it('aborting after the response arrived does nothing', async () => {
    const { a, b, ta } = pair();
    b.registry.method('quick', () => 'done');
    const controller = new AbortController();

    expect(await a.call('quick', [], { signal: controller.signal })).toBe('done');
    controller.abort();
    await settle();
    expect(ta.sent).toHaveLength(1);
    expect(ta.sent.some((f) => f.includes('rpc.cancel'))).toBe(false);
  });

  it('a timeout sends rpc.cancel once, and a later abort sends nothing more', async () => {
    const { a, b, ta } = pair();
    let handlerSignal: AbortSignal | undefined;
    b.registry.method('hang', (_p, ctx) => {
      handlerSignal = ctx.signal;
      return never();
    });
    const controller = new AbortController();

    const err = await rejectionOf(a.call('hang', [], { timeoutMs: 20, signal: controller.signal }));
    expect(err).toBeInstanceOf(TimeoutError);
    controller.abort();
    await settle();
    expect(ta.sent.filter((f) => f.includes('rpc.cancel'))).toEqual([cancelFrame(1)]);
    expect(handlerSignal?.aborted).toBe(true);
  });

  it('one signal cancels several calls, each with its own rpc.cancel', async () => {
    const { a, b, ta } = pair();
    b.registry.method('hang', () => never());
    const controller = new AbortController();
    const outcomes = [1, 2, 3].map(() =>
      rejectionOf(a.call('hang', [], { signal: controller.signal })),
    );
    await settle();
    controller.abort();
    for (const err of await Promise.all(outcomes)) expect(err).toBeInstanceOf(CancelledError);
    expect(ta.sent.slice(3).sort()).toEqual([cancelFrame(1), cancelFrame(2), cancelFrame(3)]);
  });

  it('an rpc.cancel naming no running call is ignored', async () => {
    const { a, b, tb } = pair();
    const gate = deferred<string>();
    b.registry.method('slow', () => gate.promise);
    const p = a.call('slow');
    await settle();
    a.notify('rpc.cancel', { id: 999 });
    a.notify('rpc.cancel', [1]);
    a.notify('rpc.cancel');
    await settle();
    gate.resolve('finished');
    expect(await p).toBe('finished');
    expect(tb.sent).toHaveLength(1);
  });
});

describe('bounded pending table', () => {
  it('rejects the call beyond maxPendingCalls and accepts one again after a call settles', async () => {
    const { a, b, ta } = pair({ maxPendingCalls: 2 });
    const gates: Deferred<string>[] = [];
    b.registry.method('wait', () => {
      const gate = deferred<string>();
      gates.push(gate);
      return gate.promise;
    });

    const first = a.call('wait');
    const second = a.call('wait');
    const third = await rejectionOf(a.call('wait'));
    expect(third).toBeInstanceOf(TooManyPendingCallsError);
    expect(third).toMatchObject({ limit: 2 });
    expect(a.pendingCount).toBe(2);
    await settle();
    expect(ta.sent).toHaveLength(2);
    expect(gates).toHaveLength(2);

    gates[0]!.resolve('one');
    expect(await first).toBe('one');
    expect(a.pendingCount).toBe(1);

    const fourth = a.call('wait');
    await settle();
    expect(gates).toHaveLength(3);
    gates[1]!.resolve('two');
    gates[2]!.resolve('four');
    expect(await second).toBe('two');
    expect(await fourth).toBe('four');
  });

  it('a batch that would overflow the table rejects as a whole and frees what it took', async () => {
    const { a, b, ta } = pair({ maxPendingCalls: 2 });
    b.registry.method('x', () => 1);
    const err = await rejectionOf(a.batch([{ method: 'x' }, { method: 'x' }, { method: 'x' }]));
    expect(err).toBeInstanceOf(TooManyPendingCallsError);
    expect(a.pendingCount).toBe(0);
    expect(ta.sent).toEqual([]);
    expect(await a.call('x')).toBe(1);
  });
});

describe('maxInFlight', () => {
  it('answers -32000 Server busy beyond the callee’s maxInFlight', async () => {
    const { a, b } = pair({}, { maxInFlight: 1 });
    const gate = deferred<string>();
    const handler = vi.fn(() => gate.promise);
    b.registry.method('wait', handler);

    const first = a.call('wait');
    const busy = await rejectionOf(a.call('wait'));
    expect(busy).toBeInstanceOf(JsonRpcError);
    expect(busy).toMatchObject({ code: -32000, message: 'Server busy', data: { maxInFlight: 1 } });
    expect(handler).toHaveBeenCalledTimes(1);
    expect(b.inFlightCount).toBe(1);

    gate.resolve('done');
    expect(await first).toBe('done');
    expect(b.inFlightCount).toBe(0);
    // Room again.
    const again = deferred<string>();
    handler.mockImplementation(() => again.promise);
    const third = a.call('wait');
    await settle();
    again.resolve('again');
    expect(await third).toBe('again');
  });

  it('sync handlers never count against maxInFlight', async () => {
    const { a, b } = pair({}, { maxInFlight: 1 });
    b.registry.method('sync', ([n]: readonly unknown[]) => n);
    const results = await Promise.all([1, 2, 3, 4].map((n) => a.call('sync', [n])));
    expect(results).toEqual([1, 2, 3, 4]);
  });
});
