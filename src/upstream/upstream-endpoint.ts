import { nanoid } from 'nanoid';
import type { Params } from '../protocol/types.js';
import { JsonRpcError } from '../protocol/errors.js';
import { UpstreamError } from './upstream-error.js';

/** One request as an upstream transport (HTTP, NATS) sends it. */
export interface UpstreamRequest {
  readonly method: string;
  readonly params: Params | undefined;
  /** Undefined for a notification. */
  readonly id: number | undefined;
  readonly headers: Record<string, string>;
  /** The attempt's timeout (its signal aborts then). */
  readonly timeoutMs: number;
  /** Aborted on the caller's cancel or the attempt's timeout. */
  readonly signal: AbortSignal;
}

export interface UpstreamCallOptions {
  /** The caller's cancellation (the client's rpc.cancel or disconnect). */
  signal?: AbortSignal;
  /** Per attempt: after it, the request is aborted and the call fails -32012. */
  timeoutMs: number;
  /** Sent with the request (identity headers, traceparent). */
  headers?: Record<string, string>;
  /** Safe to send again after -32011 or -32012 (at most `retries` times). Default false. */
  idempotent?: boolean;
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
  /** How many times a call that is safe to send again is sent again. */
  retries: number;
  observer?: UpstreamObserver;
}

/** The first retry waits this long, doubling, with jitter; never more than MAX_BACKOFF_MS. */
const BASE_BACKOFF_MS = 25;
const MAX_BACKOFF_MS = 1_000;

/**
 * What every upstream does the same whatever its transport: the concurrency bound (refused at
 * once, never queued), a timeout per attempt, safe retries with a short backoff, the request id,
 * the deadline header and the metrics. `attempt` sends one request and reads its reply.
 */
export abstract class UpstreamEndpoint {
  private inFlightCount = 0;
  private nextId = 1;

  constructor(protected readonly options: UpstreamEndpointOptions) {}

  get name(): string {
    return this.options.name;
  }

  /** Calls to this upstream now in flight. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /**
   * Call `method` on the upstream: resolves with its result; rejects with its JSON-RPC error
   * unchanged (a JsonRpcError), an UpstreamError for a transport failure, or the signal's reason
   * when the caller cancelled.
   */
  call(method: string, params: Params | undefined, options: UpstreamCallOptions): Promise<unknown> {
    return this.run(method, params, options, true);
  }

  /** Send a notification (no id): resolves once the upstream took it. Never retried. */
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
    if (this.inFlightCount >= maxConcurrent) {
      observer?.settled(name, 'busy', 0);
      throw new UpstreamError('busy', name, `${maxConcurrent} calls in flight`);
    }
    this.inFlightCount++;
    observer?.started(name);
    let outcome: UpstreamOutcome = 'ok';
    try {
      return await this.withRetries(method, params, options, expectsReply);
    } catch (err) {
      outcome = outcomeOf(err, options.signal);
      throw err;
    } finally {
      this.inFlightCount--;
      observer?.settled(name, outcome, (performance.now() - started) / 1000);
    }
  }

  private async withRetries(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    expectsReply: boolean,
  ): Promise<unknown> {
    const headers = { ...options.headers };
    // One id per call, the same on each attempt: an upstream can tell a retry from a new call.
    headers['x-request-id'] ??= nanoid();
    const retries = expectsReply ? this.options.retries : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(method, params, options, headers, expectsReply);
      } catch (err) {
        const safe =
          err instanceof UpstreamError &&
          (err.unsent || (options.idempotent === true && err.failure !== 'busy'));
        if (!safe || attempt >= retries || options.signal?.aborted) throw err;
        await backoff(attempt, options.signal);
      }
    }
  }

  private async once(
    method: string,
    params: Params | undefined,
    options: UpstreamCallOptions,
    headers: Record<string, string>,
    expectsReply: boolean,
  ): Promise<unknown> {
    options.signal?.throwIfAborted();
    const controller = new AbortController();
    // The error is made when the timer fires: an Error's stack costs more than the call's other work.
    const timer = setTimeout(
      () =>
        controller.abort(
          new UpstreamError(
            'timeout',
            this.options.name,
            `no answer within ${options.timeoutMs} ms`,
          ),
        ),
      options.timeoutMs,
    );
    const cancel = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', cancel, { once: true });
    try {
      headers['x-wsrpc-deadline'] = String(Date.now() + options.timeoutMs);
      const request: UpstreamRequest = {
        method,
        params,
        id: expectsReply ? this.nextId++ : undefined,
        headers,
        timeoutMs: options.timeoutMs,
        signal: controller.signal,
      };
      const result = await abortable(this.attempt(request), controller.signal);
      return result;
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', cancel);
    }
  }
}

/** `work`, or the signal's reason as soon as it aborts (a transport that ignores it never hangs a call). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? (signal.reason as Error) : (err as Error));
      },
    );
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
