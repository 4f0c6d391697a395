import { describe, it, expect, vi, afterEach } from 'vitest';
import { PendingCalls } from '../../src/peer/pending-calls.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import {
  CancelledError,
  ConnectionClosedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../src/protocol/local-errors.js';
import { cleanup } from './helpers.js';
import { rejectionOf } from '../support/promises.js';
import { openCall } from '../support/peers.js';

afterEach(cleanup);

/** Reach the private id counter, to test the wrap-around without 2^53 calls. */
function setNextId(calls: PendingCalls, id: number): void {
  (calls as unknown as { nextId: number }).nextId = id;
}

describe('PendingCalls', () => {
  it('hands out increasing ids and settles each entry exactly once', async () => {
    const calls = new PendingCalls(10, 0, () => undefined);
    const one = openCall(calls, 'm');
    const two = openCall(calls, 'm');
    expect([one.id, two.id]).toEqual([1, 2]);
    expect(calls.size).toBe(2);

    expect(calls.resolve(1, 'result')).toBe(true);
    expect(calls.resolve(1, 'again')).toBe(false);
    expect(calls.reject(1, { code: 1, message: 'x' })).toBe(false);
    expect(await one.promise).toBe('result');

    expect(calls.reject(2, { code: -32602, message: 'bad', data: 1 })).toBe(true);
    const err = await rejectionOf(two.promise);
    expect(err).toBeInstanceOf(InvalidParamsError);
    expect(calls.size).toBe(0);
  });

  it('does not match string ids to numeric entries', async () => {
    const calls = new PendingCalls(10, 0, () => undefined);
    const call = openCall(calls, 'm');
    expect(calls.resolve('1', 'no')).toBe(false);
    expect(calls.resolve(null, 'no')).toBe(false);
    expect(calls.size).toBe(1);
    calls.resolve(call.id, 'yes');
    expect(await call.promise).toBe('yes');
  });

  it('wraps the id counter and skips ids that are still pending', async () => {
    const calls = new PendingCalls(10, 0, () => undefined);
    const one = openCall(calls, 'm');
    const two = openCall(calls, 'm');
    setNextId(calls, Number.MAX_SAFE_INTEGER);
    const last = openCall(calls, 'm');
    expect(last.id).toBe(Number.MAX_SAFE_INTEGER);
    const wrapped = openCall(calls, 'm');
    // 1 and 2 are still pending, so the counter must skip them.
    expect(wrapped.id).toBe(3);
    expect(new Set([one.id, two.id, last.id, wrapped.id]).size).toBe(4);

    calls.rejectAll(new ConnectionClosedError());
    for (const p of [one, two, last, wrapped]) {
      expect(await rejectionOf(p.promise)).toBeInstanceOf(ConnectionClosedError);
    }
  });

  it('throws TooManyPendingCallsError when full', () => {
    const calls = new PendingCalls(1, 0, () => undefined);
    const first = openCall(calls, 'm');
    expect(() => openCall(calls, 'm')).toThrow(TooManyPendingCallsError);
    calls.resolve(first.id, null);
    expect(openCall(calls, 'm').id).toBe(2);
  });

  it('remembers timed-out and cancelled ids as abandoned, answered ones not', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const onCancel = vi.fn();
    const calls = new PendingCalls(10, 100, onCancel);
    const timed = openCall(calls, 't');
    const controller = new AbortController();
    const cancelled = openCall(calls, 'c', { signal: controller.signal, timeoutMs: 0 });
    const answered = openCall(calls, 'a', { timeoutMs: 0 });

    vi.advanceTimersByTime(100);
    expect(await rejectionOf(timed.promise)).toBeInstanceOf(TimeoutError);
    controller.abort('why');
    const err = await rejectionOf(cancelled.promise);
    expect(err).toBeInstanceOf(CancelledError);
    expect(err).toMatchObject({ method: 'c', reason: 'why' });
    // Both a timeout and an abort give the call up, and each tells the other side once.
    expect(onCancel.mock.calls).toEqual([[timed.id], [cancelled.id]]);

    calls.resolve(answered.id, 1);
    expect(await answered.promise).toBe(1);

    expect(calls.wasAbandoned(timed.id)).toBe(true);
    expect(calls.wasAbandoned(cancelled.id)).toBe(true);
    expect(calls.wasAbandoned(answered.id)).toBe(false);
    expect(calls.wasAbandoned(999)).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('calls made one at a time arm the timer once: it outlives them, fires for nothing, and goes', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const setTimer = vi.spyOn(globalThis, 'setTimeout');
    const onCancel = vi.fn();
    const calls = new PendingCalls(10, 1_000, onCancel);
    for (let i = 0; i < 5; i++) {
      const call = openCall(calls, 'm');
      calls.resolve(call.id, i);
      vi.advanceTimersByTime(10);
    }
    expect(setTimer).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(1_000);
    expect(vi.getTimerCount()).toBe(0);
    expect(onCancel).not.toHaveBeenCalled();
    setTimer.mockRestore();
  });

  it('rejectAll clears every timer and abort listener', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const onCancel = vi.fn();
    const calls = new PendingCalls(10, 1_000, onCancel);
    const controller = new AbortController();
    const opened = [
      openCall(calls, 'a'),
      openCall(calls, 'b', { timeoutMs: 5 }),
      openCall(calls, 'c', { signal: controller.signal }),
    ];
    // One timer for the table, armed for the earliest deadline.
    expect(vi.getTimerCount()).toBe(1);

    calls.rejectAll(new ConnectionClosedError('gone', 1006));
    expect(vi.getTimerCount()).toBe(0);
    expect(calls.size).toBe(0);
    for (const p of opened) {
      expect(await rejectionOf(p.promise)).toMatchObject({ closeCode: 1006 });
    }
    controller.abort();
    expect(onCancel).not.toHaveBeenCalled();
  });
});
