import type { CallState, HandlerContext } from '../peer/handler-context.js';
import type { Logger } from '../peer/logger.js';
import type { RequestId } from '../protocol/types.js';

/** The topic a stream stands for, and whether the session may still have it. */
export interface StandsFor {
  readonly topic: string;
  mayGoOn(): Promise<boolean>;
}

/**
 * What a per-subscriber stream's handler receives: the subscribe call's context, with a `signal`
 * that lives as long as the stream. It aborts when the subscribe is cancelled or its connection
 * closes before the stream starts (as the call's own signal does), and when the stream ends for
 * any reason after that: the subscriber unsubscribes, the connection closes, the stream completes
 * or fails. An `async function*` handler awaiting something can hand it the signal and end at
 * once instead of at its next `yield`.
 */
export class StreamContext<S> implements HandlerContext<S> {
  // Made when the handler first reads `signal`, as the call's own is: most never do.
  private controller: AbortController | undefined;
  private ended = false;

  constructor(private readonly call: HandlerContext<S>) {}

  get session(): S {
    return this.call.session;
  }
  get logger(): Logger {
    return this.call.logger;
  }
  get id(): RequestId | undefined {
    return this.call.id;
  }
  get method(): string {
    return this.call.method;
  }
  get traceparent(): string | undefined {
    return this.call.traceparent;
  }
  get tracestate(): string | undefined {
    return this.call.tracestate;
  }
  get state(): CallState {
    return this.call.state;
  }
  afterReply(hook: () => void): void {
    this.call.afterReply(hook);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      const callSignal = this.call.signal;
      if (this.ended) controller.abort();
      else if (callSignal.aborted) controller.abort(callSignal.reason);
      else {
        const forward = () => controller.abort(callSignal.reason);
        callSignal.addEventListener('abort', forward, { once: true });
        controller.signal.addEventListener(
          'abort',
          () => callSignal.removeEventListener('abort', forward),
          { once: true },
        );
      }
    }
    return this.controller.signal;
  }

  /**
   * For a stream that stands for a topic (`$presence`): the topic, and whether the session may
   * still have it, asked when its identity is refreshed, as a topic subscription is weighed
   * again. Set by the handler; a stream without it is kept.
   */
  standsFor: StandsFor | undefined;

  /** Mark a stream as standing for a topic: see `standsFor`. Other contexts keep nothing. */
  static markStandsFor<S>(ctx: HandlerContext<S>, standsFor: StandsFor): void {
    if (ctx instanceof StreamContext) ctx.standsFor = standsFor;
  }

  /** The stream is over (or never started): the signal aborts, once. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.controller?.abort();
  }
}
