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
}

/**
 * Calls made while disconnected wait here, bounded in number. Each keeps its
 * own timeout and AbortSignal running while it waits, so a queued call settles
 * exactly once: sent on reconnect, timed out, cancelled, or failed on close.
 * The caller checks that an entry can be encoded before queueing it; one that
 * still fails when flushed is rejected alone and the flush goes on.
 */
export class OfflineQueue {
  readonly #items = new Set<Deferred>();

  constructor(private readonly limit: number) {}

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
      this.#items.delete(item);
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
      expire: () => item.fail(new TimeoutError(method, timeout)),
    };
    if (deadline !== undefined)
      // Node fires a longer timer at once (TimeoutOverflowWarning); clamp as PendingCalls does.
      timer = setTimeout(item.expire, Math.min(timeout, MAX_TIMER_MS));
    const stopListening = onAbort(options.signal, (reason) =>
      item.fail(new CancelledError(method, reason)),
    );
    this.#items.add(item);
    return promise;
  }

  /**
   * Run everything queued, in order. One entry that fails does not stop the others. One whose
   * deadline has passed (its timer not run yet: a throttled background tab's timers run late)
   * times out here, unsent: sent, it would run on the server after its caller was told it
   * timed out.
   */
  flush(): void {
    const now = Date.now();
    for (const item of [...this.#items]) {
      if (item.deadline !== undefined && item.deadline <= now) {
        item.expire();
        continue;
      }
      try {
        item.run(item.deadline === undefined ? 0 : item.deadline - now);
      } catch (err) {
        item.fail(err);
      }
    }
  }

  failAll(err: unknown): void {
    for (const item of [...this.#items]) item.fail(err);
  }
}
