import { CancelledError, NotConnectedError, TimeoutError } from '../protocol/local-errors.js';
import { MAX_TIMER_MS } from '../peer/pending-calls.js';
import type { CallOptions } from '../peer/pending-calls.js';
import { onAbort } from './wanted.js';

/** Work deferred until the next connection opens. */
interface Deferred {
  /** Epoch ms after which the call has timed out; undefined for none. */
  deadline: number | undefined;
  run: (remainingTimeout: number) => void;
  fail: (err: unknown) => void;
  /** Fail with the TimeoutError of its own timeout (its deadline passed unsent). */
  expire: () => void;
  /** The places it takes in the call table once sent: its requests (a notification none). */
  slots: number;
  /** Queued ahead of what the application queued (a call sent again: see `enqueue`'s `ahead`). */
  ahead: boolean;
}

/**
 * Calls made while disconnected wait here, bounded in number. Each keeps its
 * own timeout and AbortSignal running while it waits, so a queued call settles
 * exactly once: sent on reconnect, timed out, cancelled, or failed on close.
 * The caller checks that an entry can be encoded before queueing it; one that
 * still fails when flushed is rejected alone and the flush goes on. A flush sends
 * no more than the call table has room for: the rest wait, in order, for the
 * next flush (a call settling makes room), never rejected for want of room.
 */
export class OfflineQueue {
  #items = new Set<Deferred>();
  /** How many entries at the front were queued `ahead`. */
  #ahead = 0;

  constructor(
    private readonly limit: number,
    /** Why the last attempt to connect failed, for the TimeoutError of a call never sent. */
    private readonly lastFailure: () => string | undefined = () => undefined,
  ) {}

  get size(): number {
    return this.#items.size;
  }

  /** True when `enqueue` would refuse: `limit` entries wait. */
  get full(): boolean {
    return this.#items.size >= this.limit;
  }

  /** The error a full queue refuses with. */
  fullError(): NotConnectedError {
    return new NotConnectedError(`Not connected and ${this.limit} calls are already queued`);
  }

  /**
   * Queue `send`, to be run with the time left of its timeout once connected.
   * Rejects at once with NotConnectedError when the queue is full.
   */
  enqueue<T>(
    method: string,
    options: CallOptions,
    defaultTimeout: number,
    send: (remainingTimeout: number) => Promise<T>,
    /** The places it takes in the call table (a call 1, a batch its requests, a notify 0). */
    slots = 1,
    /**
     * Ahead of what the application queued, behind those queued ahead before it: a call made
     * earlier and sent again goes before calls made after it, in the order they were made.
     */
    ahead = false,
  ): Promise<T> {
    if (this.full) return Promise.reject(this.fullError());
    if (options.signal?.aborted)
      return Promise.reject(new CancelledError(method, options.signal.reason));
    const timeout = options.timeoutMs ?? options.timeout ?? defaultTimeout;
    const deadline = timeout > 0 && Number.isFinite(timeout) ? Date.now() + timeout : undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let resolveOuter!: (value: T) => void;
    let rejectOuter!: (err: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolveOuter = res;
      rejectOuter = rej;
    });
    const cleanup = (): void => {
      if (this.#items.delete(item) && item.ahead) this.#ahead--;
      clearTimeout(timer);
      stopListening();
    };
    const item: Deferred = {
      deadline,
      run: (remaining) => {
        cleanup();
        let sent: Promise<T>;
        try {
          sent = send(remaining);
        } catch (err) {
          // A send that throws (e.g. params made unserialisable since they were queued)
          // fails its own entry only.
          rejectOuter(err);
          return;
        }
        sent.then(resolveOuter, rejectOuter);
      },
      fail: (err) => {
        cleanup();
        rejectOuter(err);
      },
      // Never sent, unless queued `ahead`: a call sent once and refused, sent again.
      expire: () =>
        item.fail(new TimeoutError(method, timeout, ahead, ahead ? undefined : this.lastFailure())),
      slots,
      ahead,
    };
    if (deadline !== undefined)
      // Node fires a longer timer at once (TimeoutOverflowWarning); clamp as PendingCalls does.
      timer = setTimeout(item.expire, Math.min(timeout, MAX_TIMER_MS));
    const stopListening = onAbort(options.signal, (reason) =>
      item.fail(new CancelledError(method, reason)),
    );
    if (ahead) {
      const items = [...this.#items];
      items.splice(this.#ahead++, 0, item);
      this.#items = new Set(items);
    } else this.#items.add(item);
    return promise;
  }

  /**
   * Run what is queued, in order, while the call table has `room`: the first entry that does
   * not fit stops the flush, and it and those after it wait for the next (true when any do).
   * One that needs more than the whole table (`capacity`) is run, to fail as it would while
   * connected. A connection that stops being `live` (an entry's send closed it) stops the flush
   * too: the rest wait for the next connection. One entry that fails does not stop the others.
   * One whose deadline has passed (its timer not run yet: a throttled background tab's timers
   * run late) times out here, unsent: sent, it would run on the server after its caller was
   * told it timed out.
   */
  flush(room: number, capacity: number, live: () => boolean): boolean {
    const now = Date.now();
    for (const item of [...this.#items]) {
      // Settled meanwhile (by a flush its send led to, or its own signal): not run again.
      if (!this.#items.has(item)) continue;
      if (!live()) return true;
      if (item.deadline !== undefined && item.deadline <= now) {
        item.expire();
        continue;
      }
      if (item.slots > room && item.slots <= capacity) return true;
      room -= item.slots;
      try {
        item.run(item.deadline === undefined ? 0 : item.deadline - now);
      } catch (err) {
        item.fail(err);
      }
    }
    return false;
  }

  failAll(err: unknown): void {
    for (const item of [...this.#items]) item.fail(err);
  }
}
