import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OfflineQueue } from '../../src/client/offline-queue.js';
import { TimeoutError } from '../../src/protocol/local-errors.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { waitForState } from '../support/client.js';
import { captureLogger, logged } from '../support/logging.js';
import { sumGateway } from '../support/client.js';
import { waitFor } from '../support/waiting.js';
import { NotConnectedError } from '../../src/protocol/local-errors.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('offline queue: params that cannot be serialised', () => {
  it('fail at once while disconnected, as they do while connected', async () => {
    const first = await sumGateway(res);
    const client = res.client(first.url);
    await client.opened();
    // Connected: a notification throws, a call rejects.
    expect(() => client.notify('record', [1n])).toThrow(TypeError);
    expect(await rejectionOf(client.call('sum', [1n]))).toBeInstanceOf(TypeError);

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    expect(() => client.notify('record', [1n])).toThrow(TypeError);
    expect(() => client.notify('record', circular)).toThrow(TypeError);
    expect(await rejectionOf(client.call('record', circular))).toBeInstanceOf(TypeError);
    const batch = await rejectionOf(client.batch([{ method: 'record', params: [2n] }]));
    expect(batch).toBeInstanceOf(TypeError);

    // Nothing bad was queued: the next connection carries the good calls only.
    const good = client.call('sum', [1, 2]);
    await sumGateway(res, {}, first.port);
    expect(await good).toBe(3);
  });

  it('a queued entry that fails when flushed is dropped alone; the rest are sent', async () => {
    const first = await sumGateway(res);
    const { logger, records } = captureLogger();
    const client = res.client(first.url, { logger, callTimeoutMs: 5_000 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    // Valid when queued, made unserialisable before the flush.
    const note: Record<string, unknown> = { n: 1 };
    client.notify('record', note);
    const call: Record<string, unknown> = { n: 2 };
    const badCall = rejectionOf(client.call('record', call));
    note['self'] = note;
    call['self'] = call;
    client.notify('record', ['later']);
    const after = client.call('sum', [2, 3]);
    const later: unknown[] = [];

    const second = await sumGateway(res, {}, first.port);
    second.gateway.method('record', (params) => {
      later.push(params);
    });
    expect(await badCall).toBeInstanceOf(TypeError);
    // Without a robust flush the throw escapes onopen and nothing after it is sent.
    expect(await after).toBe(5);
    // Queued before the call, so handled before the call was answered.
    expect(later).toEqual([['later']]);
    expect(logged(records, 'queued notification dropped')).toHaveLength(1);
  });
});

describe('offline queue: full', () => {
  it('a notification past maxQueued throws NotConnectedError, as a call rejects; those queued are sent on connecting', async () => {
    const first = await sumGateway(res);
    const client = res.client(first.url, { maxQueued: 2 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const queued = client.call('sum', [1, 2]);
    client.notify('record', ['kept']);
    const refused = await rejectionOf(client.call('sum', [3, 4]));
    expect(refused).toBeInstanceOf(NotConnectedError);
    expect(() => client.notify('record', ['over'])).toThrow(
      new NotConnectedError('Not connected and 2 calls are already queued'),
    );

    const second = await sumGateway(res, {}, first.port);
    const recorded: unknown[] = [];
    second.gateway.method('record', (params) => void recorded.push(params));
    expect(await queued).toBe(3);
    await waitFor(() => recorded.length === 1, 'the queued notification');
    expect(await client.call('sum', [0, 0])).toBe(0);
    expect(recorded).toEqual([['kept']]);
  });
});

describe('offline queue: subscribes no one wants any more', () => {
  type Op = { subscribe: string } | { unsubscribe: string };
  const topics = ['a', 'b', 'c'];
  const op = fc.oneof(
    fc.constantFrom(...topics).map((t): Op => ({ subscribe: t })),
    fc.constantFrom(...topics).map((t): Op => ({ unsubscribe: t })),
  );

  it('leave the queue: they hold no place in maxQueued and the next connection sends only the wanted ones, once', async () => {
    const maxQueued = topics.length + 1;
    const first = await sumGateway(res);
    const port = first.port;
    const client = res.client(first.url, {
      maxQueued,
      reconnect: { initialDelayMs: 10, maxDelayMs: 20 },
    });
    await client.opened();
    await first.gateway.close();
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 30 }), async (ops) => {
        await waitForState(client, 'reconnecting');
        // While disconnected: subscribe and unsubscribe as the app's views come and go.
        const held = new Map<string, { unsubscribe(): void }[]>(topics.map((t) => [t, []]));
        for (const step of ops) {
          if ('subscribe' in step) {
            held.get(step.subscribe)!.push(client.subscribe(step.subscribe).subscribe());
          } else held.get(step.unsubscribe)!.pop()?.unsubscribe();
        }
        const wanted = topics.filter((t) => held.get(t)!.length > 0);
        // The model: one queued subscribe per topic still wanted, and room for a call beside them.
        const call = client.call('sum', [1, 2]).catch((err: Error) => err.name);
        const subscribed: string[] = [];
        const second = await sumGateway(res, {}, port);
        try {
          for (const topic of topics) {
            second.gateway.topic(topic, {
              authorize: () => {
                subscribed.push(topic);
                return true;
              },
            });
          }
          // Queued in order before the call: answered, every subscribe queued before it was read.
          expect(await call).toBe(3);
          expect([...subscribed].sort()).toEqual(wanted);
        } finally {
          for (const subscriptions of held.values()) for (const s of subscriptions) s.unsubscribe();
          await second.gateway.close();
        }
      }),
      { numRuns: 15 },
    );
  }, 60_000);
});

describe('offline queue: an entry whose deadline passed before its timer ran', () => {
  afterEach(() => void vi.useRealTimers());

  it('times out unsent when flushed (a late timer, as in a throttled tab), with its own timeout', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const queue = new OfflineQueue(10);
    const sent: number[] = [];
    const send = (remaining: number) => {
      sent.push(remaining);
      return Promise.resolve('ran');
    };
    const late = queue.enqueue('late', { timeoutMs: 1_000 }, 30_000, send);
    const onTime = queue.enqueue('onTime', { timeoutMs: 5_000 }, 30_000, send);
    // The clock moves on, the timers do not run (a background tab's are held back).
    vi.setSystemTime(Date.now() + 1_500);
    queue.flush();
    const timedOut = await late.catch((err: unknown) => err);
    expect(timedOut).toBeInstanceOf(TimeoutError);
    expect((timedOut as TimeoutError).message).toBe('Call to "late" timed out after 1000 ms');
    expect(await onTime).toBe('ran');
    // Only the call still in time went out, with what is left of its timeout.
    expect(sent).toEqual([3_500]);
    expect(queue.size).toBe(0);
  });
});
