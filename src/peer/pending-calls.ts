import { JsonRpcError } from '../protocol/errors.js';
import {
  CancelledError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../protocol/local-errors.js';
import type { ErrorObject, RequestId } from '../protocol/types.js';

export interface CallOptions {
  /**
   * Milliseconds to wait for the response; 0 (or Infinity) waits forever, and more than
   * 2^31-1 (about 24.8 days, the longest a timer takes) waits that long. Defaults to the
   * peer's `callTimeoutMs`.
   */
  timeoutMs?: number;
  /** @deprecated Use `timeoutMs` (which wins when both are given). */
  timeout?: number;
  /** Aborting it rejects the call with CancelledError and tells the other side (rpc.cancel). */
  signal?: AbortSignal;
  /**
   * Called with the result as soon as the response is read: before the promise settles, and
   * so before any later message of the same read is handled. For state that notifications
   * following the response depend on, such as a subscription id (a promise's callbacks run
   * only after every message already read). An exception it throws is ignored.
   */
  onResult?: (result: unknown) => void;
}

interface Entry {
  method: string;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  onResult: ((result: unknown) => void) | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * The longest delay a Node or browser timer takes (2^31-1 ms, about 24.8 days); a longer one
 * fires at once (Node warns TimeoutOverflowWarning). Longer timeouts are clamped to it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How many ids given up locally (timeout, cancel) to remember, to log their late answers quietly. */
const ABANDONED_MEMORY = 256;

/**
 * Outgoing calls awaiting a response. Ids come from a counter, so none is
 * reused while pending. Every entry settles exactly once: response, timeout,
 * cancellation or `rejectAll` on close; each path clears its timer and listener.
 */
export class PendingCalls {
  // Made on first use: a server holds one table per connection, and most never call out.
  private entriesMap: Map<number, Entry> | undefined;
  private nextId = 1;
  /** In the order given up, oldest first. */
  private abandoned: Set<RequestId> | undefined;

  constructor(
    private readonly limit: number,
    private readonly defaultTimeout: number,
    /** Called when a call is given up (cancelled or timed out), so the peer can send rpc.cancel. */
    private readonly onCancel: (id: number) => void,
  ) {}

  get size(): number {
    return this.entriesMap?.size ?? 0;
  }

  private get entries(): Map<number, Entry> {
    return (this.entriesMap ??= new Map());
  }

  /** Reserve an id and a settle-once entry. Throws TooManyPendingCallsError when full. */
  open(method: string, options: CallOptions = {}): { id: number; promise: Promise<unknown> } {
    if (this.size >= this.limit) throw new TooManyPendingCallsError(this.limit);
    if (options.signal?.aborted) throw new CancelledError(method, options.signal.reason);
    const id = this.allocateId();
    let resolve!: (value: unknown) => void;
    let reject!: (reason: unknown) => void;
    const promise = new Promise<unknown>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const entry: Entry = {
      method,
      resolve,
      reject,
      onResult: options.onResult,
      timer: undefined,
      signal: options.signal,
      onAbort: undefined,
    };
    const timeout = options.timeoutMs ?? options.timeout ?? this.defaultTimeout;
    if (timeout > 0 && Number.isFinite(timeout)) {
      entry.timer = setTimeout(
        () => {
          this.giveUp(id);
          this.settle(id)?.reject(new TimeoutError(method, timeout));
          // Nobody waits for the answer any more: let the other side stop working on it.
          this.onCancel(id);
        },
        Math.min(timeout, MAX_TIMER_MS),
      );
    }
    if (options.signal) {
      const signal = options.signal;
      entry.onAbort = () => {
        if (!this.entries.has(id)) return;
        this.giveUp(id);
        this.settle(id)?.reject(new CancelledError(method, signal.reason));
        this.onCancel(id);
      };
      signal.addEventListener('abort', entry.onAbort, { once: true });
    }
    this.entries.set(id, entry);
    return { id, promise };
  }

  /** Settle with a response. Returns false when no call is waiting for this id. */
  resolve(id: RequestId, result: unknown): boolean {
    const entry = typeof id === 'number' ? this.settle(id) : undefined;
    if (!entry) return false;
    if (entry.onResult) {
      try {
        entry.onResult(result);
      } catch {
        // The caller's hook; the promise still settles with the result.
      }
    }
    entry.resolve(result);
    return true;
  }

  /** Settle with an error response. Returns false when no call is waiting for this id. */
  reject(id: RequestId, error: ErrorObject): boolean {
    const entry = typeof id === 'number' ? this.settle(id) : undefined;
    if (!entry) return false;
    entry.reject(JsonRpcError.fromErrorObject(error));
    return true;
  }

  /** Settle one entry locally (e.g. its frame could not be sent). */
  fail(id: number, reason: unknown): void {
    this.settle(id)?.reject(reason);
  }

  /** Reject every pending call; used once, on close. */
  rejectAll(reason: unknown): void {
    if (!this.entriesMap) return;
    for (const id of [...this.entriesMap.keys()]) this.settle(id)?.reject(reason);
  }

  /** True when this id was given up locally (timed out or cancelled). */
  wasAbandoned(id: RequestId): boolean {
    return this.abandoned?.has(id) ?? false;
  }

  private settle(id: number): Entry | undefined {
    const entry = this.entriesMap?.get(id);
    if (!entry) return undefined;
    this.entriesMap!.delete(id);
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    if (entry.onAbort) entry.signal?.removeEventListener('abort', entry.onAbort);
    return entry;
  }

  private giveUp(id: RequestId): void {
    const abandoned = (this.abandoned ??= new Set());
    abandoned.add(id);
    if (abandoned.size > ABANDONED_MEMORY) abandoned.delete(abandoned.values().next().value!);
  }

  private allocateId(): number {
    // Wraps long before precision is lost; skips ids still pending.
    for (;;) {
      const id = this.nextId;
      this.nextId = id >= Number.MAX_SAFE_INTEGER ? 1 : id + 1;
      if (!this.entriesMap?.has(id)) return id;
    }
  }
}
