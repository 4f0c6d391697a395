import { JsonRpcError } from '../protocol/errors.js';
import {
  CancelledError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../protocol/local-errors.js';
import { encodeRequest } from '../protocol/encode.js';
import { ReservedMethod } from '../protocol/reserved.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { jsonShape } from '../protocol/safe-json.js';
import type { ErrorObject, Params, RequestId } from '../protocol/types.js';

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
   * only after every message already read). An exception it throws is ignored. A result that
   * comes after the call was given up (timed out, cancelled) still reaches it, if among the
   * last ABANDONED_MEMORY given up: what the other side made for the call (a subscription) can
   * then be undone.
   */
  onResult?: (result: unknown) => void;
}

interface Entry {
  method: string;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  onResult: ((result: unknown) => void) | undefined;
  /** When the call times out, on the table's clock; Infinity when it never does. */
  deadline: number;
  /** The timeout asked for, as the TimeoutError reports it. */
  timeout: number;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** What the call was sent with: its params, or its batch's frame written again (Sent). */
  sent: Sent;
  /** Its frame's depth and values (jsonShape), once a refusal has asked (a lone call's). */
  shape?: JsonShape | undefined;
}

/** A call taken out of the table unsettled (PendingCalls.withdraw). */
export interface WithdrawnCall {
  method: string;
  params: Params | undefined;
  /** What is left of its timeout; 0: none. */
  timeoutMs: number;
  signal: AbortSignal | undefined;
  onResult: ((result: unknown) => void) | undefined;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/**
 * What a call was sent in, to find it by should the peer refuse that frame (failRefused): a lone
 * call's params (its frame is written again from them, its text not kept), or the writer of its
 * batch's frame, shared by the batch's calls.
 */
export type Sent = Params | undefined | BatchWriter;

/** Writes a batch's frame again; `members`: how many messages it holds (what -32002 counts). */
export type BatchWriter = (() => string) & { members: number; shape?: JsonShape };

type JsonShape = ReturnType<typeof jsonShape>;

/**
 * The errors failRefused rejected calls with: the whole frame was refused, so a batch's
 * notifications were not delivered either (PeerCore.batch).
 */
export const frameRefusals = new WeakSet<object>();

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
 * cancellation or `rejectAll` on close; each path removes its abort listener.
 *
 * Timeouts share one timer, armed for the earliest deadline or earlier (a timer per call was
 * the largest single cost of a call). Settling a call leaves the timer as it is: when it fires
 * it times out every call whose deadline has passed and is armed again for the earliest of the
 * rest. The last timed call settling leaves it armed too: it fires once for nothing at that
 * deadline (a caller with one call at a time would otherwise arm and clear a timer per call,
 * which cost more than the rest of the call). `rejectAll`, on close, clears it.
 */
export class PendingCalls {
  // Made on first use: a server holds one table per connection, and most never call out.
  #entries: Map<number, Entry> | undefined;
  private nextId = 1;
  /** The id of the entry `add` made last. */
  lastId = 0;
  /** In the order given up, oldest first: each with its onResult, which a late result reaches. */
  #abandoned: Map<RequestId, ((result: unknown) => void) | undefined> | undefined;
  /** How many entries have a finite deadline. */
  #timed = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The deadline `#timer` is armed for: at or before every pending one. */
  #armedFor = Infinity;
  readonly #limit: number;
  readonly #defaultTimeout: number;
  readonly #onCancel: (id: number) => void;

  constructor(
    limit: number,
    defaultTimeout: number,
    /** Called when a call is given up (cancelled or timed out), so the peer can send rpc.cancel. */
    onCancel: (id: number) => void,
  ) {
    this.#limit = limit;
    this.#defaultTimeout = defaultTimeout;
    this.#onCancel = onCancel;
  }

  get size(): number {
    return this.#entries?.size ?? 0;
  }

  /** Told after each entry settles, while set: a queue waiting for room (the client's). */
  onSettled: (() => void) | undefined = undefined;

  /**
   * Reserve an id and a settle-once entry: the promise, the id left in `lastId` (a call's hot
   * path allocates nothing it can do without). Throws TooManyPendingCallsError when full.
   */
  add(method: string, options?: CallOptions, sent?: Sent): Promise<unknown> {
    // rpc.ping has one slot beyond the limit: a heartbeat must still find out that a connection
    // whose table its calls fill (and wait on for ever, the server gone) is dead.
    const room = method === ReservedMethod.Ping ? this.#limit + 1 : this.#limit;
    if (this.size >= room) throw new TooManyPendingCallsError(this.#limit);
    const signal = options?.signal;
    if (signal?.aborted) throw new CancelledError(method, signal.reason);
    const id = this.allocateId();
    this.lastId = id;
    const timeout = options?.timeoutMs ?? options?.timeout ?? this.#defaultTimeout;
    const entry: Entry = {
      method,
      resolve: undefined!,
      reject: undefined!,
      onResult: options?.onResult,
      deadline: Infinity,
      timeout,
      signal,
      onAbort: undefined,
      sent,
    };
    const promise = new Promise<unknown>((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    if (timeout > 0 && timeout < Infinity) {
      const delay = Math.min(timeout, MAX_TIMER_MS);
      // A monotonic clock: deadlines do not move with the wall clock.
      entry.deadline = performance.now() + delay;
      this.#timed++;
      if (entry.deadline < this.#armedFor) this.#arm(entry.deadline, delay);
    }
    if (signal) {
      entry.onAbort = () => this.#giveUp(id, new CancelledError(method, signal.reason));
      signal.addEventListener('abort', entry.onAbort, { once: true });
    }
    (this.#entries ??= new Map()).set(id, entry);
    return promise;
  }

  /** Settle with a response. Returns false when no call is waiting for this id. */
  resolve(id: RequestId, result: unknown): boolean {
    const entry = this.#settle(id);
    if (!entry) {
      const late = this.#abandoned?.get(id);
      if (late) {
        // Once: a second response with the id is no answer to anything.
        this.#abandoned!.set(id, undefined);
        runOnResult(late, result);
      }
      return false;
    }
    if (entry.onResult) runOnResult(entry.onResult, result);
    entry.resolve(result);
    return true;
  }

  /**
   * Take a lone call out of the table unsettled, for its caller to be answered another way (the
   * call sent again on another connection): what it needs for that, with what is left of its
   * timeout (0: none). Undefined when no call waits for `id`, or it went in a batch.
   */
  withdraw(id: RequestId): WithdrawnCall | undefined {
    const entry = this.#entries?.get(id as number);
    if (!entry || typeof entry.sent === 'function') return undefined;
    this.#settle(id);
    const { method, sent, deadline, signal, onResult, resolve, reject } = entry;
    const timeoutMs = deadline === Infinity ? 0 : Math.max(1, deadline - performance.now());
    return { method, params: sent, timeoutMs, signal, onResult, resolve, reject };
  }

  /** The method of the call waiting for `id`; undefined when none does. */
  methodOf(id: RequestId): string | undefined {
    return this.#entries?.get(id as number)?.method;
  }

  /** Settle with an error response. Returns false when no call is waiting for this id. */
  reject(id: RequestId, error: ErrorObject): boolean {
    const entry = this.#settle(id);
    if (!entry) return false;
    const answer = JsonRpcError.fromErrorObject(error);
    answer.method = entry.method;
    entry.reject(answer);
    return true;
  }

  /**
   * Settle one entry locally (its frame could not be sent, or its response was malformed).
   * Returns false when no call is waiting for this id.
   */
  fail(id: RequestId, reason: unknown): boolean {
    const entry = this.#settle(id);
    entry?.reject(reason);
    return !!entry;
  }

  /**
   * The peer refused a frame (id null): unread (-32600, `data` naming the `maxJsonValues` or
   * `maxDepth` it passed), or a batch past its `maxBatch` (-32002, `data.received` its length).
   * The peer reads frames in order and answers such a refusal at once, so it is the oldest pending
   * call whose frame passes that limit (written again and counted as the peer counts it), or the
   * oldest batch of that length. It fails with the error, and with it every call of its batch.
   * False when no pending call's frame is the one.
   */
  failRefused(error: ErrorObject): boolean {
    const data = error.data as
      { maxJsonValues?: unknown; maxDepth?: unknown; received?: unknown } | undefined;
    if (error.code === ErrorCode.BatchTooLarge) {
      // A batch refused for its length: the oldest in flight of that many messages (of any, when
      // the refusal does not say how many it read).
      const received = data?.received;
      for (const { sent } of this.#entries?.values() ?? []) {
        if (
          typeof sent === 'function' &&
          (typeof received !== 'number' || sent.members === received)
        )
          return this.#failBatch(sent, error);
      }
      return false;
    }
    if (error.code !== ErrorCode.InvalidRequest) return false;
    const values = data?.maxJsonValues;
    const depth = data?.maxDepth;
    if (typeof values !== 'number' && typeof depth !== 'number') return false;
    /** The batch last looked at: its calls follow one another, and one look does for all. */
    let seen: BatchWriter | undefined;
    for (const [id, entry] of this.#entries ?? []) {
      const { method, sent } = entry;
      if (typeof sent === 'function') {
        if (sent === seen) continue;
        seen = sent;
      }
      // Each frame is written again and measured once, whatever the refusals that come (a peer
      // sending such refusals over and over must not make every pending call re-encoded each time).
      const shape =
        typeof sent === 'function'
          ? (sent.shape ??= jsonShape(sent()))
          : (entry.shape ??= jsonShape(encodeRequest(id, method, sent)));
      const over =
        typeof values === 'number' ? shape.values > values : shape.depth > (depth as number);
      if (!over) continue;
      if (typeof sent === 'function') return this.#failBatch(sent, error);
      const refused = JsonRpcError.fromErrorObject(error);
      frameRefusals.add(refused);
      return this.fail(id, refused);
    }
    return false;
  }

  /** Every call sent in the batch `sent` writes fails with `error`, the refusal of its frame. */
  #failBatch(sent: BatchWriter, error: ErrorObject): boolean {
    const refused = JsonRpcError.fromErrorObject(error);
    frameRefusals.add(refused);
    this.#entries!.forEach((entry, id) => entry.sent === sent && this.fail(id, refused));
    return true;
  }

  /** The call `id` went out in a batch after all (gathered by the peer): `sent` writes it. */
  regroup(id: number, sent: BatchWriter): void {
    const entry = this.#entries?.get(id);
    if (entry) entry.sent = sent;
  }

  /** Reject every pending call; used once, on close. */
  rejectAll(reason: unknown): void {
    // Deleting the entry being visited is safe in a Map's forEach.
    this.#entries?.forEach((_, id) => this.fail(id, reason));
    this.#arm(Infinity);
  }

  /** True when this id was given up locally (timed out or cancelled). */
  wasAbandoned(id: RequestId): boolean {
    return this.#abandoned?.has(id) ?? false;
  }

  #settle(id: RequestId): Entry | undefined {
    const entry = this.#entries?.get(id as number);
    if (!entry) return undefined;
    this.#entries!.delete(id as number);
    if (entry.deadline < Infinity) this.#timed--;
    if (entry.onAbort) entry.signal!.removeEventListener('abort', entry.onAbort);
    this.onSettled?.();
    return entry;
  }

  /** Arm the timer for `deadline`, `delay` ms away; without a delay, only clear it. */
  #arm(deadline: number, delay?: number): void {
    clearTimeout(this.#timer);
    this.#armedFor = deadline;
    if (delay) this.#timer = setTimeout(() => this.#expire(), delay);
  }

  /**
   * The timer fired: time out every call whose deadline has passed, in the order they were
   * made, and arm the timer for the earliest of the rest. The timer firing means its own
   * deadline has come, whatever the clock reads (a clock and its timers may be faked apart in
   * tests).
   */
  #expire(): void {
    const at = Math.max(performance.now(), this.#armedFor);
    this.#arm(Infinity);
    let next = Infinity;
    // Settling removes the entry being visited, which a Map's iteration allows.
    for (const [id, { method, timeout, deadline }] of this.#entries!) {
      if (deadline <= at) this.#giveUp(id, new TimeoutError(method, timeout));
      else if (deadline < next) next = deadline;
    }
    // `next` may be of a call settled meanwhile (rpc.cancel's send closing the connection): the
    // timer then fires early for nothing, and is armed again.
    if (this.#timed) this.#arm(next, Math.min(Math.ceil(next - at), MAX_TIMER_MS));
  }

  /** Give a call up locally: reject it, remember its id, and tell the other side. */
  #giveUp(id: number, reason: Error): void {
    const entry = this.#settle(id);
    if (!entry) return;
    const abandoned = (this.#abandoned ??= new Map());
    abandoned.set(id, entry.onResult);
    if (abandoned.size > ABANDONED_MEMORY) abandoned.delete(abandoned.keys().next().value!);
    entry.reject(reason);
    // Nobody waits for the answer any more: let the other side stop working on it.
    this.#onCancel(id);
  }

  private allocateId(): number {
    // Wraps long before precision is lost; skips ids still pending.
    for (;;) {
      const id = this.nextId;
      this.nextId = id >= Number.MAX_SAFE_INTEGER ? 1 : id + 1;
      if (!this.#entries?.has(id)) return id;
    }
  }
}

function runOnResult(onResult: (result: unknown) => void, result: unknown): void {
  try {
    onResult(result);
  } catch {
    // The caller's hook; the promise still settles with the result.
  }
}
