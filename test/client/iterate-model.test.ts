/*
 * iterate() in memory: the client is a stand-in whose subscribeWithMeta is an Observable the
 * test feeds, so that a property test can interleave messages, gap signals, the loop taking
 * messages, the subscription's error or completion and `return()` at will, and check what the
 * loop gets against a model: a FIFO of at most `bufferSize` that drops its oldest (counted in
 * `dropped`) or, with overflow 'error', ends with BufferOverflowError once what it held is
 * taken. Also: the options are checked as createClient's are.
 */
import fc from 'fast-check';
import { Observable } from 'rxjs';
import type { Subscriber } from 'rxjs';
import { describe, expect, it } from 'vitest';
import {
  BufferOverflowError,
  DEFAULT_ITERATE_BUFFER,
  iterate,
} from '../../src/client/async-iterate.js';
import type { IterateOptions } from '../../src/client/async-iterate.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import type { RpcClient } from '../../src/client/client.js';
import { JsonRpcError } from '../../src/protocol/errors.js';

/** A client whose one subscription the test drives; counts its Observers. */
function standIn() {
  const feed = { observers: 0, subscribes: 0, to: undefined as Subscriber<unknown> | undefined };
  const client = {
    subscribeWithMeta: () =>
      new Observable<SubscriptionEvent<unknown>>((subscriber) => {
        feed.subscribes++;
        feed.observers++;
        feed.to = subscriber as Subscriber<unknown>;
        return () => {
          feed.observers--;
          feed.to = undefined;
        };
      }),
  } as unknown as RpcClient;
  return { feed, client };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

type Step =
  | { kind: 'message' }
  | { kind: 'gap' }
  | { kind: 'take' }
  | { kind: 'error' }
  | { kind: 'complete' }
  | { kind: 'return' };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 8, arbitrary: fc.constant({ kind: 'message' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'gap' } as const) },
  { weight: 6, arbitrary: fc.constant({ kind: 'take' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'error' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'complete' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'return' } as const) },
);

type Outcome = { value: number } | { done: true } | { error: unknown };

describe('iterate, model-based', () => {
  it('yields what a bounded FIFO with the overflow policy holds, in order, and counts the dropped', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.constantFrom<IterateOptions['overflow']>('drop-oldest', 'error'),
        fc.array(step, { maxLength: 60 }),
        async (bufferSize, overflow, steps) => {
          const { feed, client } = standIn();
          const it = iterate<number>(client, 'feed', undefined, { bufferSize, overflow });
          // The model.
          const held: number[] = [];
          let dropped = 0;
          let sent = 0;
          /** Takes that are waiting, in order: what each will get. */
          const waiting: ((outcome: Outcome) => void)[] = [];
          let ended = false;
          let failure: unknown;
          let started = false;
          const outcomes: Promise<[Outcome, Outcome]>[] = [];
          const end = (error?: unknown): void => {
            ended = true;
            if (error !== undefined && waiting.length > 0) {
              waiting.shift()!({ error });
              error = undefined;
            }
            failure = error;
            for (const w of waiting.splice(0)) w({ done: true });
          };

          for (const s of steps) {
            switch (s.kind) {
              case 'message':
              case 'gap': {
                if (!feed.to) break;
                if (s.kind === 'gap') {
                  feed.to.next({ data: undefined, gap: 2 });
                  break;
                }
                const value = ++sent;
                feed.to.next({ data: value, seq: value });
                if (ended) break;
                if (waiting.length > 0) waiting.shift()!({ value });
                else if (held.length < bufferSize) held.push(value);
                else if (overflow === 'drop-oldest') {
                  held.shift();
                  held.push(value);
                  dropped++;
                } else end(new BufferOverflowError(bufferSize));
                break;
              }
              case 'take': {
                // The first take of a loop not ended yet subscribes.
                if (!ended) started = true;
                let expected: Outcome | undefined;
                if (held.length > 0) expected = { value: held.shift()! };
                else if (failure !== undefined) {
                  expected = { error: failure };
                  failure = undefined;
                } else if (ended) expected = { done: true };
                const actual = it.next().then(
                  (r): Outcome => (r.done ? { done: true } : { value: r.value }),
                  (error: unknown): Outcome => ({ error }),
                );
                const wanted =
                  expected !== undefined
                    ? Promise.resolve(expected)
                    : new Promise<Outcome>((resolve) => waiting.push(resolve));
                outcomes.push(Promise.all([actual, wanted]));
                break;
              }
              case 'error':
                if (!feed.to) break;
                feed.to.error(new JsonRpcError(-32004, 'Unauthorized'));
                if (!ended) end(new JsonRpcError(-32004, 'Unauthorized'));
                break;
              case 'complete':
                if (!feed.to) break;
                feed.to.complete();
                if (!ended) end();
                break;
              case 'return':
                await it.return!();
                held.splice(0);
                failure = undefined;
                if (!ended) end();
                break;
            }
            await flush();
            expect(it.dropped).toBe(dropped);
            // Subscribed from the first take until the loop ends.
            expect(feed.observers).toBe(started && !ended ? 1 : 0);
          }
          // Takes still waiting end with the loop.
          await it.return!();
          if (!ended) end();
          for (const [actual, wanted] of await Promise.all(outcomes)) {
            expect(actual).toEqual(wanted);
          }
          expect(feed.subscribes).toBe(started ? 1 : 0);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a loop that waits while 20 messages come keeps the last bufferSize and counts the rest', async () => {
    const { feed, client } = standIn();
    const it = iterate<number>(client, 'feed', undefined, { bufferSize: 5 });
    const first = it.next();
    for (let n = 1; n <= 20; n++) feed.to!.next({ data: n, seq: n });
    expect(await first).toEqual({ done: false, value: 1 });
    const rest: number[] = [];
    for (let i = 0; i < 5; i++) rest.push((await it.next()).value as number);
    expect(rest).toEqual([16, 17, 18, 19, 20]);
    expect(it.dropped).toBe(14);
    await it.return!();
    expect(feed.observers).toBe(0);
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it('holds 1 000 messages by default', async () => {
    const { feed, client } = standIn();
    const it = iterate<number>(client, 'feed');
    const first = it.next();
    for (let n = 1; n <= 1_500; n++) feed.to!.next({ data: n });
    await first;
    expect(it.dropped).toBe(1_500 - 1 - DEFAULT_ITERATE_BUFFER);
    expect((await it.next()).value).toBe(1_500 - DEFAULT_ITERATE_BUFFER + 1);
    await it.return!();
  });
});

describe('iterate options', () => {
  const { client } = standIn();
  const refused: [IterateOptions | Record<string, unknown>, typeof TypeError, string][] = [
    [{ bufferSize: 0 }, RangeError, 'bufferSize must be an integer at least 1, not 0'],
    [{ bufferSize: 2.5 }, RangeError, 'bufferSize must be an integer at least 1, not 2.5'],
    [{ bufferSize: '10' }, TypeError, 'bufferSize must be an integer at least 1, not "10"'],
    [
      { overflow: 'drop-newest' },
      RangeError,
      'overflow must be "drop-oldest" or "error", not "drop-newest"',
    ],
    [
      { bufferSzie: 10 },
      TypeError,
      'bufferSzie is not an option of iterate (did you mean bufferSize?)',
    ],
  ];
  it.each(refused)('refuses %j', (options, error, says) => {
    expect(() => iterate(client, 'feed', undefined, options as IterateOptions)).toThrow(error);
    expect(() => iterate(client, 'feed', undefined, options as IterateOptions)).toThrow(says);
  });
});
