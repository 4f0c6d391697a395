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
import { msgpack } from '../../src/msgpack.js';

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
    queue.flush(10, 10, () => true);
    const timedOut = await late.catch((err: unknown) => err);
    expect(timedOut).toBeInstanceOf(TimeoutError);
    expect((timedOut as TimeoutError).message).toBe(
      'Call to "late" timed out after 1000 ms, never sent: no connection was open',
    );
    expect(await onTime).toBe('ran');
    // Only the call still in time went out, with what is left of its timeout.
    expect(sent).toEqual([3_500]);
    expect(queue.size).toBe(0);
  });

  it('a call queued ahead (sent once, refused, to be sent again) that times out is not told "never sent"', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const queue = new OfflineQueue(10);
    const send = () => Promise.resolve('ran');
    const again = queue.enqueue('again', { timeoutMs: 1_000 }, 30_000, send, 1, true);
    const fresh = queue.enqueue('fresh', { timeoutMs: 1_000 }, 30_000, send);
    vi.advanceTimersByTime(1_000);
    const [timedOut, neverSent] = (await Promise.all([
      again.catch((err: unknown) => err),
      fresh.catch((err: unknown) => err),
    ])) as TimeoutError[];
    expect([timedOut!.sent, timedOut!.message]).toEqual([
      true,
      'Call to "again" timed out after 1000 ms',
    ]);
    expect(neverSent!.sent).toBe(false);
  });
});

describe('offline queue: the call table has room for only some of it', () => {
  it('a flush sends entries in order while they fit the room; the rest wait, in order, for the next (model)', async () => {
    const capacity = 6;
    // An entry: its slots in the call table (0 a notification, past capacity a batch too big).
    const entry = fc.integer({ min: 0, max: capacity + 1 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(entry, { maxLength: 20 }),
        fc.array(fc.integer({ min: 0, max: capacity }), { minLength: 1, maxLength: 30 }),
        async (slots, rooms) => {
          const queue = new OfflineQueue(100);
          const sent: number[] = [];
          const settled: Promise<unknown>[] = slots.map((n, i) =>
            queue.enqueue(
              `m${i}`,
              { timeoutMs: 0 },
              0,
              () => {
                sent.push(i);
                return Promise.resolve(i);
              },
              n,
            ),
          );
          // The model: a flush runs the queue's head while it fits what is left of the room
          // (one too big for the whole table runs, to fail as it would connected), and stops at
          // the first that does not.
          let next = 0;
          for (const room of rooms) {
            let left = room;
            while (next < slots.length && (slots[next]! <= left || slots[next]! > capacity)) {
              left -= slots[next]!;
              next++;
            }
            const waits = queue.flush(room, capacity, () => true);
            expect(waits).toBe(next < slots.length);
            expect(sent).toEqual(Array.from({ length: next }, (_, i) => i));
            expect(queue.size).toBe(slots.length - next);
          }
          // Nothing waiting is lost: flushes with the whole table free send the rest, each
          // settling with its own.
          while (queue.flush(capacity, capacity, () => true));
          expect(await Promise.all(settled)).toEqual(slots.map((_, i) => i));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('calls queued past maxPendingCalls are all sent once connected, as calls settle, in order, none refused', async () => {
    const first = await sumGateway(res);
    const client = res.client(first.url, { maxPendingCalls: 3, maxQueued: 40 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    // Calls, notifications and a batch of two, queued in this order.
    const calls: Promise<unknown>[] = [];
    for (let n = 0; n < 12; n++) {
      calls.push(client.call('record', [n]));
      client.notify('record', [`note ${n}`]);
    }
    const batch = client.batch([
      { method: 'record', params: ['batch a'] },
      { method: 'record', params: ['batch b'] },
    ]);

    const second = await sumGateway(res, {}, first.port);
    const recorded: unknown[] = [];
    // Each call held a little: the table (3) is full while the queue still has calls.
    second.gateway.method('record', async (params) => {
      recorded.push((params as unknown[])[0]);
      await new Promise((resolve) => setTimeout(resolve, 2));
      return (params as unknown[])[0];
    });
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 12 }, (_, n) => n));
    const results = await batch;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    await waitFor(() => recorded.length === 12 * 2 + 2, 'everything queued');
    const expected: unknown[] = [];
    for (let n = 0; n < 12; n++) expected.push(n, `note ${n}`);
    expected.push('batch a', 'batch b');
    expect(recorded).toEqual(expected);
  });
});

describe('offline queue: the connection closes while the queue is sent', () => {
  it('a flush stops when the connection stops being live; the rest wait for the next', () => {
    const queue = new OfflineQueue(10);
    const sent: string[] = [];
    let live = true;
    const entry = (name: string, closes = false) =>
      queue.enqueue(name, { timeoutMs: 0 }, 0, () => {
        sent.push(name);
        if (closes) live = false;
        return Promise.resolve(name);
      });
    const settled = [entry('a'), entry('closes', true), entry('b'), entry('c')];
    expect(queue.flush(10, 10, () => live)).toBe(true);
    expect(sent).toEqual(['a', 'closes']);
    expect(queue.size).toBe(2);
    live = true;
    expect(queue.flush(10, 10, () => live)).toBe(false);
    expect(sent).toEqual(['a', 'closes', 'b', 'c']);
    return expect(Promise.all(settled)).resolves.toEqual(['a', 'closes', 'b', 'c']);
  });

  it('calls and notifications queued behind an entry whose send closes the connection go on the next one', async () => {
    const port = (await sumGateway(res, { encodings: ['json', 'msgpack'] })).port;
    await res.gateways.pop()!.close();
    const { logger, records } = captureLogger();
    const client = res.client(`ws://127.0.0.1:${port}/rpc`, { encoding: msgpack, logger });
    // Queued while the gateway is away. The batch's notification nests deeper than MessagePack
    // carries: sending it closes the connection 1011 (docs/client.md), in the middle of the flush.
    let deep: unknown[] = [];
    for (let i = 0; i < 600; i++) deep = [deep];
    const before = client.call('sum', [1, 1]);
    const batch = client.batch([
      { method: 'sum', params: [2, 2] },
      { method: 'note', params: deep, notification: true },
    ]);
    const after = [3, 4, 5].map((n) => client.call('sum', [n, n]));
    client.notify('record', ['queued']);
    const recorded: unknown[] = [];
    const second = await sumGateway(res, { encodings: ['json', 'msgpack'] }, port);
    second.gateway.method('record', (params) => void recorded.push(params));
    expect(await before).toBe(2);
    await batch.catch(() => undefined);
    expect(await Promise.all(after)).toEqual([6, 8, 10]);
    await waitFor(() => recorded.length === 1, 'the queued notification');
    expect(recorded).toEqual([['queued']]);
    expect(logged(records, 'queued notification dropped')).toHaveLength(0);
  });
});
