import { nanoid } from 'nanoid';
import type { Params } from '../protocol/types.js';
import { JsonRpcError } from '../protocol/errors.js';
import { addressGroup } from '../server/address-group.js';
import { KeyedShares } from './keyed-shares.js';
import { DEFAULT_REPLY_LIMITS } from './read-reply.js';
import type { ReplyLimits } from './read-reply.js';
import { UpstreamError } from './upstream-error.js';
import {
  defaultMaxConcurrentPerAddress,
  defaultMaxConcurrentPerSession,
  defaultMaxConcurrentPerUser,
  defaultReservedForNewCallers,
} from './upstreams-config.js';

/** One request as an upstream transport (HTTP, NATS) sends it. */
export interface UpstreamRequest {
  readonly method: string;
  readonly params: Params | undefined;
  /** Undefined for a notification. */
  readonly id: number | undefined;
  /** The request's own (the transport may add to it): identity, request id, deadline. */
  readonly headers: Record<string, string>;
  /** UpstreamCallOptions.onResultText: the transport hands it to readReply. */
  readonly onResultText: ((text: string) => void) | undefined;
  /** The attempt's timeout (its signal aborts then). */
  readonly timeoutMs: number;
  /** Aborted on the caller's cancel or the attempt's timeout (made when first read). */
  readonly signal: AbortSignal;
  /** True once the attempt is aborted; `abortReason` then says why. */
  readonly aborted: boolean;
  readonly abortReason: unknown;
  /**
   * Call `listener` once when the attempt is aborted (at once if it is): what `signal` does,
   * without an AbortController per attempt. One listener: the transport's.
   */
  onAbort(listener: (reason: unknown) => void): void;
  /**
   * Keep the call's slot, and its session's, address's and user's shares, past the attempt's
   * answer until the returned function is called (once is enough; more do nothing): for a request
   * the transport still holds once it has answered, such as a notification taken by its status
   * whose reply is still read off its socket. Else an answered request would free a slot while
   * holding a socket, and one caller could hold more of the upstream than its shares. Call it
   * before settling the attempt.
   */
  keepAfterAnswer(): () => void;
}

export interface UpstreamCallOptions {
  /** The caller's cancellation (the client's rpc.cancel or disconnect). */
  signal?: AbortSignal;
  /** Per attempt: after it, the request is aborted and the call fails -32012. */
  timeoutMs: number;
  /**
   * Sent with the request (identity headers, traceparent and tracestate). The call takes the
   * object as its own: `x-request-id` (when missing) and `x-wsrpc-deadline` are set on it, and an
   * HTTP upstream's fixed headers added, so a call copies no headers.
   */
  headers?: Record<string, string>;
  /** Safe to send again after -32011 or -32012 (at most `retries` times). Default false. */
  idempotent?: boolean;
  /**
   * Given the text of the result as the upstream wrote it, when it may hold a number that
   * JavaScript does not hold exactly (see readReply), to send the client that text.
   */
  onResultText?: (text: string) => void;
  /**
   * Whose share of the upstream the call takes (the client's session): at most
   * `maxConcurrentPerSession` calls of one session are in flight. None: only maxConcurrent.
   */
  session?: object;
  /**
   * The client's address (its session's, after trusted proxies): all calls from one address group
   * (IPv6: its /64) take at most `maxConcurrentPerAddress`. None (stdio, in-process): not bounded
   * by it.
   */
  address?: string | undefined;
  /**
   * The session's authenticated user (`Session.user`): all calls of one user's sessions, from
   * whatever addresses, take at most `maxConcurrentPerUser`. None (an anonymous session): not
   * bounded by it.
   */
  user?: string | undefined;
}

/** How each upstream request ended, for metrics. */
export type UpstreamOutcome = 'ok' | 'error' | 'unavailable' | 'timeout' | 'busy' | 'cancelled';

export interface UpstreamObserver {
  started(upstream: string): void;
  settled(upstream: string, outcome: UpstreamOutcome, seconds: number): void;
}

export interface UpstreamEndpointOptions {
  /** The upstream's name: in errors' data, logs and metric labels. */
  name: string;
  /** Calls in flight at once (retries and their backoff included); more are refused -32013. */
  maxConcurrent: number;
  /**
   * Of those, the calls of one session (`UpstreamCallOptions.session`), counted the same way;
   * more of that session's are refused -32013. Default: max(1, floor(maxConcurrent / 8)).
   */
  maxConcurrentPerSession?: number;
  /**
   * Of those, the calls from one client address group (`UpstreamCallOptions.address`), counted the
   * same way; more from that address are refused -32013. Default: max(maxConcurrentPerSession, 1,
   * floor(maxConcurrent / 4)).
   */
  maxConcurrentPerAddress?: number;
  /**
   * Of those, the calls of one user's sessions (`UpstreamCallOptions.user`), counted the same way;
   * more of that user's are refused -32013. Default: max(maxConcurrentPerSession, 1,
   * floor(maxConcurrent / 4)).
   */
  maxConcurrentPerUser?: number;
  /**
   * Of maxConcurrent, the slots kept for new callers: a call whose session, address group or user
   * already has a call in flight is refused -32013 once `maxConcurrent - reservedForNewCallers`
   * calls are in flight, so callers at their full shares cannot take the last slots from one that
   * has none. Calls that name no session, address or user are not counted as either. Default:
   * floor(maxConcurrent / 8).
   */
  reservedForNewCallers?: number;
  /**
   * How many times a call that is safe to send again is sent again. A retry is sent only once
   * the transport has let go of the attempt before it, so a call holds one request at a time.
   */
  retries: number;
  /**
   * The nesting and the JSON values a reply may hold (the gateway's `limits.maxDepth` and
   * `maxJsonValues`); past either the call fails -32011 naming the bound. Default 64 levels,
   * 10 000 values (DEFAULT_REPLY_LIMITS).
   */
  replyLimits?: ReplyLimits;
  observer?: UpstreamObserver;
}

/** The first retry waits this long, doubling, with jitter; never more than MAX_BACKOFF_MS. */
const BASE_BACKOFF_MS = 25;
const MAX_BACKOFF_MS = 1_000;

/**
 * What every upstream does the same whatever its transport: the concurrency bounds, the
 * upstream's and each session's, user's and client address's share of it (refused at once, never
 * queued), a timeout per attempt, safe retries with a short backoff, the request id, the deadline
 * header and the metrics. `attempt` sends one request and reads its reply.
 */
export abstract class UpstreamEndpoint {
  private inFlightCount = 0;
  private nextId = 1;
  /**
   * Each session's share: its calls in flight and its address group. Weak: an entry goes with its
   * session; made once per session and counted in place, so a call allocates nothing for it and
   * works out its address group (a parse of the address) only on its session's first call.
   */
  private readonly bySession = new WeakMap<object, SessionShare>();
  private readonly maxPerSession: number;
  /** Calls in flight per client address group; an entry only while it has calls in flight. */
  private readonly byAddress: KeyedShares;
  /** Calls in flight per user; an entry only while the user has calls in flight. */
  private readonly byUser: KeyedShares;
  /** The most calls in flight at which a caller already calling is admitted one more. */
  private readonly maxForCallersCalling: number;

  /**
   * True when the transport may keep an aborted attempt's request (its body, its place in a
   * queue) until `attempt` settles. The call's slot is then held until every attempt it made has
   * settled, the caller's answer not waiting for it: requests given up that the transport still
   * holds count against maxConcurrent, so cancelling cannot make the gateway hold more.
   */
  protected readonly keepsAbortedRequests: boolean = false;

  /** What the transport reads each reply with (readReply), besides its bytes. */
  protected readonly replyLimits: ReplyLimits;

  constructor(protected readonly options: UpstreamEndpointOptions) {
    this.replyLimits = options.replyLimits ?? DEFAULT_REPLY_LIMITS;
    this.maxPerSession =
      options.maxConcurrentPerSession ?? defaultMaxConcurrentPerSession(options.maxConcurrent);
    this.byAddress = new KeyedShares(
      options.maxConcurrentPerAddress ??
        defaultMaxConcurrentPerAddress(options.maxConcurrent, this.maxPerSession),
    );
    this.byUser = new KeyedShares(
      options.maxConcurrentPerUser ??
        defaultMaxConcurrentPerUser(options.maxConcurrent, this.maxPerSession),
    );
    const reserve =
      options.reservedForNewCallers ?? defaultReservedForNewCallers(options.maxConcurrent);
    if (!Number.isInteger(reserve) || reserve < 0 || reserve >= options.maxConcurrent) {
      throw new RangeError(
        `reservedForNewCallers must be an integer from 0 to below maxConcurrent (${options.maxConcurrent}), not ${reserve}`,
      );
    }
    this.maxForCallersCalling = options.maxConcurrent - reserve;
  }

  get name(): string {
    return this.options.name;
  }

  /**
   * Calls to this upstream now in flight (a call given up counts until its request is let go, a
   * notification taken until its reply is read).
   */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /**
   * Whether a call of a caller that already has one in flight would be admitted now: fewer than
   * `maxConcurrent - reservedForNewCallers` calls in flight. For hooks, which keep their callers'
   * shares themselves and call naming no session, address or user.
   */
  get admitsCallersCalling(): boolean {
    return this.inFlightCount < this.maxForCallersCalling;
  }

  /** Calls of `session` to this upstream now in flight, counted as `inFlight` counts. */
  inFlightOf(session: object): number {
    return this.bySession.get(session)?.held ?? 0;
  }

  /** Calls from `address`'s group to this upstream now in flight, counted as `inFlight` counts. */
  inFlightFrom(address: string): number {
    return this.byAddress.of(addressGroup(address));
  }

  /** Address groups with calls to this upstream in flight (the entries the gateway holds). */
  get addressesInFlight(): number {
    return this.byAddress.size;
  }

  /** Calls of `user`'s sessions to this upstream now in flight, counted as `inFlight` counts. */
  inFlightFor(user: string): number {
    return this.byUser.of(user);
  }

  /** Users with calls to this upstream in flight (the entries the gateway holds). */
  get usersInFlight(): number {
    return this.byUser.size;
  }

  /**
   * Call `method` on the upstream: resolves with its result; rejects with its JSON-RPC error
   * unchanged (a JsonRpcError), an UpstreamError for a transport failure, or the signal's reason
   * when the caller cancelled.
   */
  call(method: string, params: Params | undefined, options: UpstreamCallOptions): Promise<unknown> {
    return this.run(method, params, options, true);
  }

  /**
   * Send a notification (no id): resolves once the upstream took it. Never retried. Its slot and
   * shares are held until the transport lets go of the request (`keepAfterAnswer`), which may be
   * after this resolves: the notifying client is not made to wait for it.
   */
  async notify(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
  ): Promise<void> {
    await this.run(method, params, options, false);
  }

  abstract close(): Promise<void>;

  protected abstract attempt(request: UpstreamRequest): Promise<unknown>;

  private async run(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    expectsReply: boolean,
  ): Promise<unknown> {
    const { name, maxConcurrent, observer } = this.options;
    const started = performance.now();
    const share =
      options.session === undefined ? undefined : this.shareOf(options.session, options);
    const held = share === undefined ? 0 : share.held;
    const group = share === undefined ? groupOf(options.address) : share.group;
    const { user } = options;
    // The caller's own shares first, its session's then its user's: a session or a user past its
    // share is told so, whatever the others hold. The upstream's bound before the address's: with
    // one address holding every slot (a single client machine, a test), a full upstream is named
    // as such.
    if (held >= this.maxPerSession) {
      throw this.busy(
        'maxConcurrentPerSession',
        this.maxPerSession,
        'calls of this session in flight',
      );
    }
    if (user !== undefined && this.byUser.isFull(user)) {
      throw this.busy('maxConcurrentPerUser', this.byUser.max, 'calls of this user in flight');
    }
    if (this.inFlightCount >= maxConcurrent) {
      throw this.busy('maxConcurrent', maxConcurrent, 'calls in flight');
    }
    // The last slots are a new caller's: one with a call in flight under any key it counts under
    // (its session, address group, user) is refused them.
    if (
      !this.admitsCallersCalling &&
      (held > 0 ||
        (group !== undefined && this.byAddress.of(group) > 0) ||
        (user !== undefined && this.byUser.of(user) > 0))
    ) {
      throw this.busy(
        'reservedForNewCallers',
        this.maxForCallersCalling,
        'calls in flight, the rest kept for callers with none',
      );
    }
    if (group !== undefined && this.byAddress.isFull(group)) {
      throw this.busy(
        'maxConcurrentPerAddress',
        this.byAddress.max,
        'calls from this address in flight',
      );
    }
    this.inFlightCount++;
    if (share !== undefined) share.held++;
    if (group !== undefined) this.byAddress.take(group);
    if (user !== undefined) this.byUser.take(user);
    observer?.started(name);
    const slot = new Slot();
    let outcome: UpstreamOutcome = 'ok';
    try {
      return await this.withRetries(method, params, options, expectsReply, slot);
    } catch (err) {
      outcome = outcomeOf(err, options.signal);
      throw err;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      if (slot.kept === 0) this.free(outcome, seconds, share, group, user);
      else slot.free = () => this.free(outcome, seconds, share, group, user);
    }
  }

  /**
   * A call refused at `bound`, `limit` calls of those it counts (`what`) being in flight: counted
   * as settled busy, its error -32013 naming the bound and the limit.
   */
  private busy(bound: string, limit: number, what: string): UpstreamError {
    const { name, observer } = this.options;
    observer?.settled(name, 'busy', 0);
    return UpstreamError.busy(name, `${limit} ${what}`, bound, limit);
  }

  /**
   * The session's share, made on its first call. The address is the session's, the same on each of
   * its calls: its group is worked out then, once.
   */
  private shareOf(session: object, options: UpstreamCallOptions): SessionShare {
    let share = this.bySession.get(session);
    if (share === undefined) {
      share = { held: 0, group: groupOf(options.address) };
      this.bySession.set(session, share);
    }
    return share;
  }

  private free(
    outcome: UpstreamOutcome,
    seconds: number,
    share: SessionShare | undefined,
    group: string | undefined,
    user: string | undefined,
  ): void {
    this.inFlightCount--;
    if (share !== undefined) share.held--;
    if (group !== undefined) this.byAddress.give(group);
    if (user !== undefined) this.byUser.give(user);
    this.options.observer?.settled(this.options.name, outcome, seconds);
  }

  private withRetries(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    expectsReply: boolean,
    slot: Slot,
  ): Promise<unknown> {
    // The call's own headers, set on and sent as they are: no copy per call or attempt.
    const headers = options.headers ?? {};
    // One id per call, the same on each attempt: an upstream can tell a retry from a new call.
    headers['x-request-id'] ??= nanoid();
    const retries = expectsReply ? this.options.retries : 0;
    // No retries (the default): the attempt is the call, without a loop awaiting it.
    if (retries === 0) return this.once(method, params, options, headers, expectsReply, slot);
    return this.retrying(method, params, options, headers, retries, slot);
  }

  /**
   * The attempts of a call that may be sent again, one at a time: an attempt answered at once by
   * its timeout may still be held by the transport (an HTTP request waiting for a pool socket, a
   * NATS request until its reply or NATS's own timeout), and sending the next one meanwhile would
   * make one call hold `retries + 1` requests, past maxConcurrent for the upstream. The retry
   * waits for the transport to let go of it, at most one more `timeoutMs` (a transport that holds
   * an aborted request longer, or ignores the abort, ends the call with that attempt's error
   * rather than a second request), then backs off.
   */
  private async retrying(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    headers: Record<string, string>,
    retries: number,
    slot: Slot,
  ): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(method, params, options, headers, true, slot);
      } catch (err) {
        const safe =
          err instanceof UpstreamError &&
          (err.unsent || (options.idempotent === true && err.failure !== 'busy'));
        if (!safe || attempt >= retries || options.signal?.aborted) throw err;
        const previous = slot.last;
        const released =
          !previous || (await releasedWithin(previous, options.timeoutMs, options.signal));
        if (!released) throw err;
        await backoff(attempt, options.signal);
      }
    }
  }

  /**
   * One attempt, settled by the transport's answer or, as soon as it comes, the timeout or the
   * caller's cancel (a transport that ignores the abort never hangs a call). Aborted first, it
   * keeps the call's slot until the transport settles too, when the transport may hold it; the
   * call's next attempt, if any, waits for that settling whatever the transport (`retrying`).
   */
  private once(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    headers: Record<string, string>,
    expectsReply: boolean,
    slot: Slot,
  ): Promise<unknown> {
    const { signal, timeoutMs } = options;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    headers['x-wsrpc-deadline'] = String(Date.now() + timeoutMs);
    const request = new Attempt(
      method,
      params,
      expectsReply ? this.nextId++ : undefined,
      headers,
      timeoutMs,
      slot,
      options.onResultText,
    );
    slot.last = request;
    return new Promise<unknown>((resolve, reject) => {
      // The error is made when the timer fires: an Error's stack costs more than the call's other work.
      const timer = setTimeout(
        () =>
          request.abort(
            new UpstreamError('timeout', this.options.name, `no answer within ${timeoutMs} ms`),
          ),
        timeoutMs,
      );
      const cancel = signal && (() => request.abort(signal.reason));
      if (cancel) signal.addEventListener('abort', cancel);
      const done = () => {
        clearTimeout(timer);
        if (cancel) signal.removeEventListener('abort', cancel);
      };
      // Set when the abort answered the caller while the transport may still hold the request.
      let kept = false;
      request.settleOnAbort((reason) => {
        done();
        if (this.keepsAbortedRequests) {
          kept = true;
          slot.kept++;
        }
        reject(reason as Error);
      });
      let work: Promise<unknown>;
      try {
        work = this.attempt(request);
      } catch (err) {
        work = Promise.reject(err as Error);
      }
      work.then(
        (value) => {
          request.release();
          if (kept) return slot.letGo();
          done();
          resolve(value);
        },
        (err: unknown) => {
          request.release();
          if (kept) return slot.letGo();
          done();
          reject((request.aborted ? request.abortReason : err) as Error);
        },
      );
    });
  }
}

/** A session's calls in flight to one upstream, and its client's address group (none: unbounded). */
interface SessionShare {
  held: number;
  readonly group: string | undefined;
}

function groupOf(address: string | undefined): string | undefined {
  return address === undefined ? undefined : addressGroup(address);
}

/**
 * A call's place among maxConcurrent (and its session's, user's and address's shares): freed once
 * the call has its answer (`free` is set then) and the transport has let go of every attempt it
 * was still holding when aborted or answered (`kept`).
 */
class Slot {
  kept = 0;
  free: (() => void) | undefined;
  /** The call's latest attempt: a retry waits for the transport to let go of it. */
  last: Attempt | undefined;

  letGo(): void {
    if (--this.kept === 0) this.free?.();
  }
}

/**
 * One attempt's request, and its cancellation without an AbortController: the timer or the
 * caller's cancel calls `abort`, which tells the transport (`onAbort`) and settles the attempt.
 * `signal` is made only for a transport that reads it.
 */
class Attempt implements UpstreamRequest {
  aborted = false;
  abortReason: unknown;
  /** True once the transport settled the attempt: it holds the request no more. */
  released = false;
  private controller: AbortController | undefined;
  private listener: ((reason: unknown) => void) | undefined;
  private settle: ((reason: unknown) => void) | undefined;
  private onRelease: (() => void) | undefined;

  constructor(
    readonly method: string,
    readonly params: Params | undefined,
    readonly id: number | undefined,
    readonly headers: Record<string, string>,
    readonly timeoutMs: number,
    private readonly slot: Slot,
    readonly onResultText: ((text: string) => void) | undefined,
  ) {}

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  onAbort(listener: (reason: unknown) => void): void {
    if (this.aborted) listener(this.abortReason);
    else this.listener = listener;
  }

  keepAfterAnswer(): () => void {
    this.slot.kept++;
    let kept = true;
    return () => {
      if (!kept) return;
      kept = false;
      this.slot.letGo();
    };
  }

  /** The endpoint's side: reject the attempt when it is aborted. */
  settleOnAbort(settle: (reason: unknown) => void): void {
    this.settle = settle;
  }

  /** The endpoint's side: the transport settled the attempt. */
  release(): void {
    this.released = true;
    const listener = this.onRelease;
    this.onRelease = undefined;
    listener?.();
  }

  /** Call `listener` once the transport has let go of the request (at once if it has). One listener. */
  whenReleased(listener: () => void): void {
    if (this.released) listener();
    else this.onRelease = listener;
  }

  /** Forget the `whenReleased` listener: its waiter gave up. */
  stopWaiting(): void {
    this.onRelease = undefined;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    const { listener, settle } = this;
    this.listener = undefined;
    this.settle = undefined;
    this.controller?.abort(reason);
    listener?.(reason);
    settle?.(reason);
  }
}

/**
 * Resolves true once the transport has let go of `attempt`, false when it still holds it
 * `boundMs` on; rejects with the reason of the caller's cancel.
 */
function releasedWithin(
  attempt: Attempt,
  boundMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  if (attempt.released) return Promise.resolve(true);
  return new Promise((resolve, reject) => {
    const finish = (letGo: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      attempt.stopWaiting();
      resolve(letGo);
    };
    // Unref'd: a wait for a transport to let go never keeps the process alive on its own.
    const timer = setTimeout(() => finish(false), boundMs).unref();
    const onAbort = () => {
      clearTimeout(timer);
      attempt.stopWaiting();
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    attempt.whenReleased(() => finish(true));
  });
}

function backoff(attempt: number, signal: AbortSignal | undefined): Promise<void> {
  const ceiling = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt);
  const delay = ceiling / 2 + Math.random() * (ceiling / 2);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, delay);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function outcomeOf(err: unknown, signal: AbortSignal | undefined): UpstreamOutcome {
  if (err instanceof UpstreamError) return err.failure;
  if (err instanceof JsonRpcError) return 'error';
  return signal?.aborted ? 'cancelled' : 'unavailable';
}
