/**
 * Timeouts longer than a timer can take (2^31-1 ms): Node fires such a timer after 1 ms
 * (TimeoutOverflowWarning), so a call asked to wait 25 days would fail at once. They are
 * clamped to 2^31-1 ms.
 */
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_MS, PendingCalls } from '../../src/peer/pending-calls.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { openCall } from '../support/peers.js';

/** Every delay passed to setTimeout while `spy` watched. */
function delays(spy: { mock: { calls: unknown[][] } }): number[] {
  return spy.mock.calls.map((call) => Number(call[1] ?? 0));
}

const res = new Resources();
afterEach(async () => {
  vi.restoreAllMocks();
  await res.cleanup();
});

describe('timeouts beyond 2^31-1 ms', () => {
  it.each([2 ** 31, 2 ** 40, Number.MAX_SAFE_INTEGER])(
    'PendingCalls schedules %s ms as 2^31-1 ms, and the call stays pending',
    async (timeout) => {
      const spy = vi.spyOn(globalThis, 'setTimeout');
      const table = new PendingCalls(10, 30_000, () => undefined);
      const { id, promise } = openCall(table, 'slow', { timeout });
      promise.catch(() => undefined); // failures are asserted below, not reported as unhandled
      expect(delays(spy)).toEqual([MAX_TIMER_MS]);
      spy.mockRestore();
      expect(table.resolve(id, 'done')).toBe(true);
      expect(await promise).toBe('done');
    },
  );

  it('a server-to-client call with a 2^40 ms timeout waits for the client over a real socket', async () => {
    const { url, gateway } = await res.gateway();
    const sessionPromise = firstValueFrom(gateway.connected$);
    const gate = deferred<string>();
    const client = res.client(url);
    client.method('client.slow', () => gate.promise);
    const session = await sessionPromise;
    await client.opened();

    const spy = vi.spyOn(globalThis, 'setTimeout');
    const call = session.call('client.slow', [], { timeoutMs: 2 ** 40 });
    call.catch(() => undefined); // failures are asserted below, not reported as unhandled
    const scheduled = delays(spy);
    spy.mockRestore();
    expect(scheduled.every((ms) => ms <= MAX_TIMER_MS)).toBe(true);
    expect(scheduled).toContain(MAX_TIMER_MS);
    // A round trip on the same socket (the client answers rpc.ping itself): the slow call
    // has reached the client meanwhile and is still awaited.
    expect(await session.call('rpc.ping')).toBe('pong');
    expect(session.peer.pendingCount).toBe(1);
    gate.resolve('answered');
    expect(await call).toBe('answered');
  });
});

describe('client timers beyond 2^31-1 ms', () => {
  it('a call queued while disconnected with a 2^40 ms timeout is scheduled at 2^31-1 ms and still waits', async () => {
    const { url, gateway } = await res.gateway();
    gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
    // connectTimeoutMs beyond the limit too: the first attempt must not be cut off at once.
    const spy = vi.spyOn(globalThis, 'setTimeout');
    const client = res.client(url, { connectTimeoutMs: 2 ** 40 });
    expect(client.state).not.toBe('open'); // not open yet: the call is queued
    const call = client.call('sum', [1, 2], { timeoutMs: 2 ** 40 });
    const scheduled = delays(spy);
    spy.mockRestore();
    expect(scheduled.every((ms) => ms <= MAX_TIMER_MS)).toBe(true);
    // The connect attempt's timer and the queued call's timeout, both clamped.
    expect(scheduled.filter((ms) => ms === MAX_TIMER_MS)).toHaveLength(2);
    expect(await call).toBe(3);
  });
});
