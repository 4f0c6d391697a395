import type { RequestId } from '../protocol/types.js';
import type { Logger } from './logger.js';

/**
 * Per-call values middleware set for the handlers (and for the middleware after them): the user
 * a token resolved to, a trace id. Augment it to type them:
 * `declare module 'wsrpc-gateway' { interface CallState { traceId: string } }`.
 */
export interface CallState {
  [key: string]: unknown;
}

/** What a handler receives besides its params. */
export interface HandlerContext<S> {
  /** The session (server side) or client (client side) the call arrived on. */
  readonly session: S;
  /** Fires when the caller cancels, or the connection closes, before the handler finishes. */
  readonly signal: AbortSignal;
  /** The connection's child logger. */
  readonly logger: Logger;
  /** The request id; undefined for a notification. */
  readonly id: RequestId | undefined;
  readonly method: string;
  /**
   * The W3C trace context the caller sent with the request (its `traceparent` member, or the
   * `traceparent` header of an HTTP POST); undefined when none, or not a valid one.
   */
  readonly traceparent: string | undefined;
  /**
   * The W3C `tracestate` that came with `traceparent` (the request's `tracestate` member, or the
   * `tracestate` header of an HTTP POST whose `traceparent` it took), its list-members as they go
   * on; undefined when none, not a valid one, or without a valid traceparent. The server's only:
   * the client does not read it (and a context made elsewhere may leave it out).
   */
  readonly tracestate?: string | undefined;
  /** Set by middleware for this call (see Middleware); an empty object otherwise. */
  readonly state: CallState;
  /**
   * Run `hook` right after the success reply has been handed to the transport,
   * so anything it sends (a subscription's first message) follows the reply.
   * Not run when the call fails or the connection closes first.
   */
  afterReply(hook: () => void): void;
}

/**
 * One running incoming call. The AbortController is made only when a handler
 * reads `signal`: most handlers never do, and the hot path stays allocation-light.
 */
export class RunningCall<S> implements HandlerContext<S> {
  private controller: AbortController | undefined;
  private stateObject: CallState | undefined;
  afterSend: (() => void) | undefined;
  private abortReason: unknown;
  aborted = false;
  /**
   * Its neighbours among its connection's running calls (IncomingCalls keeps them as a list
   * through the calls): the ones that started just before and just after it.
   */
  older: RunningCall<S> | undefined;
  newer: RunningCall<S> | undefined;

  constructor(
    readonly session: S,
    readonly logger: Logger,
    readonly id: RequestId | undefined,
    readonly method: string,
    readonly traceparent: string | undefined = undefined,
    readonly tracestate: string | undefined = undefined,
  ) {}

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  /** Made on first read: handlers that never read it cost nothing. */
  get state(): CallState {
    return (this.stateObject ??= {});
  }

  afterReply(hook: () => void): void {
    const previous = this.afterSend;
    this.afterSend = previous
      ? () => {
          previous();
          hook();
        }
      : hook;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }
}
