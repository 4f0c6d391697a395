// iterate(client, topic, params, options): a subscription as an async iterator, for
// `for await (const message of iterate(client, 'news'))`. A function of its own rather than a
// client method, so that an app that does not use it does not ship it. Messages the loop has
// not taken yet wait in a bounded buffer; a full one drops its oldest message (counted, as the
// server's slow-consumer policy counts `missed`) or ends the loop with BufferOverflowError.
import type { Subscription } from 'rxjs';
import { checkOptions, numberIn, oneOf } from '../peer/option-rules.js';
import { RpcLocalError } from '../protocol/local-errors.js';
import type { RpcClient } from './client.js';

/** How many messages `iterate` holds for a loop that has not taken them, by default. */
export const DEFAULT_ITERATE_BUFFER = 1_000;

export interface IterateOptions {
  /** The most messages held for the loop (default 1 000). */
  bufferSize?: number;
  /**
   * A message arriving with the buffer full: `'drop-oldest'` (default) drops the oldest one
   * held and counts it in `dropped`; `'error'` ends the loop: the messages held are taken, then
   * `next()` rejects with BufferOverflowError.
   */
  overflow?: 'drop-oldest' | 'error';
}

/** `iterate`'s iterator: an async iterator of the messages, with what a full buffer dropped. */
export interface SubscriptionIterator<T> extends AsyncIterableIterator<T> {
  /** Messages dropped because the buffer was full (`overflow: 'drop-oldest'`). */
  readonly dropped: number;
}

/** The loop fell `bufferSize` messages behind with `overflow: 'error'`. Never on the wire. */
export class BufferOverflowError extends RpcLocalError {
  override name = 'BufferOverflowError';
  constructor(readonly bufferSize: number) {
    super(`iterate: the loop fell ${bufferSize} messages behind`);
  }
}

/**
 * The messages of the client's subscription to `topic` (with `params`), as `client.subscribe`
 * gives them (gap signals left out: `subscriptionStatus$` tells them), for `for await`. The
 * subscription starts with the first `next()` and shares the wire subscription of every other
 * Observer of the topic; `break` (or `return()`) ends it, and the last Observer's end
 * unsubscribes on the server. An error of the subscription (a refused subscribe, a stream's
 * error) rejects `next()` once the messages already held are taken; its completion ends the
 * loop. Messages wait in a buffer of `bufferSize`; see IterateOptions for a full one.
 */
export function iterate<T = unknown>(
  client: RpcClient,
  topic: string,
  params?: unknown,
  options: IterateOptions = {},
): SubscriptionIterator<T> {
  // Made here, not at the top of the module: an app that never calls iterate ships none of it.
  const rules = {
    bufferSize: numberIn(1, Infinity, true),
    overflow: oneOf('drop-oldest', 'error'),
  };
  const given = checkOptions(options, rules, '', 'iterate') as IterateOptions;
  const bufferSize = given.bufferSize ?? DEFAULT_ITERATE_BUFFER;
  const dropOldest = given.overflow !== 'error';
  /** Messages held, from `head` on (the taken ones before it are cut off now and then). */
  let held: T[] = [];
  let head = 0;
  let dropped = 0;
  /** next() calls waiting for a message, oldest first. */
  const waiting: {
    resolve: (result: IteratorResult<T>) => void;
    reject: (err: unknown) => void;
  }[] = [];
  let subscription: Subscription | undefined;
  /** The loop is over: completed, failed, or returned. */
  let ended = false;
  /** How it failed, until a next() has rejected with it. */
  let failure: { error: unknown } | undefined;

  const done = (): IteratorResult<T> => ({ done: true, value: undefined });
  const stop = (): void => {
    ended = true;
    subscription?.unsubscribe();
    // The waiting calls had nothing held: the failure goes to the first, the end to all.
    for (const waiter of waiting.splice(0)) {
      if (failure) {
        waiter.reject(failure.error);
        failure = undefined;
      } else waiter.resolve(done());
    }
  };
  const received = (value: T): void => {
    const waiter = waiting.shift();
    if (waiter) return waiter.resolve({ done: false, value });
    if (held.length - head >= bufferSize) {
      if (!dropOldest) {
        failure = { error: new BufferOverflowError(bufferSize) };
        return stop();
      }
      held[head++] = undefined as T; // let it go now, not when the buffer is next cut
      dropped++;
    }
    held.push(value);
    if (head > 1024 && head * 2 > held.length) {
      held = held.slice(head);
      head = 0;
    }
  };

  const iterator: SubscriptionIterator<T> = {
    get dropped() {
      return dropped;
    },
    next(): Promise<IteratorResult<T>> {
      if (head < held.length) {
        const value = held[head]!;
        held[head++] = undefined as T; // let it go
        return Promise.resolve({ done: false, value });
      }
      if (failure) {
        const { error } = failure;
        failure = undefined;
        return Promise.reject(error as Error);
      }
      if (ended) return Promise.resolve(done());
      const next = new Promise<IteratorResult<T>>((resolve, reject) =>
        waiting.push({ resolve, reject }),
      );
      subscription ??= client.subscribeWithMeta<T>(topic, params).subscribe({
        next: (event) => {
          if (event.gap === undefined && !ended) received(event.data);
        },
        error: (error: unknown) => {
          if (ended) return;
          failure = { error };
          stop();
        },
        complete: stop,
      });
      return next;
    },
    return(): Promise<IteratorResult<T>> {
      held = [];
      head = 0;
      failure = undefined;
      if (!ended) stop();
      return Promise.resolve(done());
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
  return iterator;
}
