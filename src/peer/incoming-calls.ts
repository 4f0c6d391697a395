import { encodeSuccess } from '../protocol/encode.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { ReservedMethod, isReservedMethod } from '../protocol/reserved.js';
import type { Params, ProtocolVersion, RequestId } from '../protocol/types.js';
import { RunningCall } from './handler-context.js';
import { Hub } from './hub.js';
import type { Logger } from './logger.js';
import type { Handler } from './method-registry.js';
import type { MiddlewareChain } from './middleware.js';
import { logNoise } from './noise-log.js';
import type { IncomingNotification } from './notifications.js';
import { closedError } from './peer-options.js';
import type { CallOutcome, CloseInfo, PeerConfig } from './peer-options.js';
import { errorReply, failure, isPromiseLike, successReply } from './replies.js';
import type { Reply } from './replies.js';

/*
 * The answering side of a peer, as every peer has it: rpc.ping, the reserved methods the layer
 * above gives and the handlers of the registry (these through the middleware), both within
 * maxInFlight, the calls still running (for rpc.cancel and close), and the observers of
 * incoming notifications. What only a server asks of it (draining, the rate limit, the
 * identity gate, authorize) is IncomingDispatch's (incoming-dispatch.ts), so the browser client
 * does not carry it. The peer makes it on first use, so an idle connection does not carry it
 * either.
 */

/**
 * Each connection's notification handlers that failed, or were not run for too many calls in
 * flight: the other side can bring either about at will, so they are logged as its noise
 * (logNoise). Kept aside, for the connections that have any, rather than in a field every
 * connection's IncomingCalls would carry.
 */
const notificationFailures = new WeakMap<object, number>();

export class IncomingCalls<S> {
  /**
   * The calls running (asynchronous handlers), oldest first, linked through the calls
   * themselves: a connection holds no table for them, not even after its calls have ended (a
   * Set and a Map kept per connection would cost each of thousands over 300 bytes). rpc.cancel
   * walks it: at most maxInFlight calls.
   */
  #oldest: RunningCall<S> | undefined;
  #newest: RunningCall<S> | undefined;
  #runningCount = 0;
  // Made on first use: most connections never need it, and a gateway holds thousands.
  #hub: Hub<IncomingNotification> | undefined;

  constructor(
    protected readonly session: S,
    protected readonly logger: Logger,
    protected readonly config: PeerConfig<S>,
    /** Set by `close`; given here when the Peer makes this after it has closed. */
    protected closeInfo: CloseInfo | undefined,
  ) {}

  /** Incoming calls being run: what a drain or a half-close waits for. */
  get inFlightCount(): number {
    return this.#runningCount;
  }

  /** Every incoming notification, as the peer's `notifications$` shows them. */
  notificationHub(): Hub<IncomingNotification> {
    if (!this.#hub) {
      this.#hub = new Hub();
      if (this.closeInfo) this.#hub.complete();
    }
    return this.#hub;
  }

  /**
   * Answer one request: the reply text, or a promise of it. `tracestate` is the one that came
   * with `traceparent`, as sent (checkedTracestate takes it for the handler). `arrived` is when
   * the call arrived (performance.now()), when the layer above read the clock before this
   * (IncomingDispatch, for onCallSettled's duration); else the clock is read as the handler
   * starts, and only when onCallSettled is set.
   */
  request(
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    traceparent?: string,
    tracestate?: unknown,
    arrived?: number,
  ): Reply | Promise<Reply> {
    if (method === ReservedMethod.Ping) return encodeSuccess(id, 'pong', version);
    if (isReservedMethod(method)) {
      const internal = this.config.reservedMethods?.get(method);
      if (!internal) return this.#notFound(id, method, version);
      // Within maxInFlight like any handler: the other side can send them as fast as it likes
      // (a flood of rpc.token reaches the client's token provider, of rpc.authenticate the
      // server's authenticate hook). They are the gateway's own methods, not the application's
      // calls: no middleware around them.
      if (this.inFlightCount >= this.config.maxInFlight) return this.#busy(id, method, version);
      return this.#runHandler(
        internal,
        id,
        method,
        params,
        version,
        undefined,
        traceparent,
        tracestate,
        arrived,
      );
    }
    const handler = this.config.registry.get(method);
    if (!handler) return this.#notFound(id, method, version);
    if (this.inFlightCount >= this.config.maxInFlight) return this.#busy(id, method, version);
    return this.run(handler, id, method, params, version, traceparent, tracestate, arrived);
  }

  /** -32601, counted as a call not found. */
  #notFound(id: RequestId, method: string, version: ProtocolVersion): string {
    this.config.onCallSettled?.(method, 'not_found', 0);
    return failure(id, ErrorCode.MethodNotFound, version);
  }

  /** -32000 with `data: { maxInFlight }`: as many calls as allowed are running. */
  #busy(id: RequestId, method: string, version: ProtocolVersion): string {
    this.config.onCallSettled?.(method, 'rejected', 0);
    return failure(id, ErrorCode.ServerBusy, version, { maxInFlight: this.config.maxInFlight });
  }

  /** Take one notification: rpc.cancel, another reserved one, or one for handlers and observers. */
  notification(method: string, params: Params | undefined): void {
    if (!isReservedMethod(method)) this.accept(method, params);
    else if (method === ReservedMethod.Cancel) this.#cancelRunning(params);
    else this.config.onReservedNotification?.(method, params);
  }

  /** The connection has closed: abort the running calls and complete the notifications. */
  close(info: CloseInfo): void {
    this.closeInfo = info;
    let call = this.#oldest;
    if (call) {
      // One error for them all, made only if there are any: an Error's stack costs microseconds,
      // and a server closes connections by the thousand, most with no call running.
      const error = closedError(this.closeInfo);
      // Each off the list first: a handler that settles later finds itself off it.
      for (; call; call = this.#oldest) {
        this.#finish(call);
        call.abort(error);
      }
    }
    this.#hub?.complete();
  }

  /** Run a found handler within the limits: through the middleware. */
  protected run(
    handler: Handler<S>,
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    traceparent: string | undefined,
    tracestate: unknown,
    arrived: number | undefined,
  ): Reply | Promise<Reply> {
    return this.#runHandler(
      handler,
      id,
      method,
      params,
      version,
      this.config.middleware,
      traceparent,
      tracestate,
      arrived,
    );
  }

  /** Hand an application notification to its handler and observers. */
  protected accept(method: string, params: Params | undefined): void {
    this.deliverNotification(method, params);
  }

  #runHandler(
    handler: Handler<S>,
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    chain: MiddlewareChain<S> | undefined,
    traceparent: string | undefined,
    tracestate: unknown,
    arrived: number | undefined,
  ): Reply | Promise<Reply> {
    const started = arrived ?? (this.config.onCallSettled ? performance.now() : 0);
    const settled = (outcome: CallOutcome): void =>
      this.config.onCallSettled?.(method, outcome, performance.now() - started);
    const call = new RunningCall(
      this.session,
      this.logger,
      id,
      method,
      traceparent,
      tracestate === undefined ? undefined : this.checkedTracestate(tracestate),
    );
    let result: unknown;
    try {
      result = chain ? chain(call, false, params, handler) : handler(params, call);
    } catch (err) {
      settled('error');
      return errorReply(call, err, version, this.config.exposeErrorDetails);
    }
    // A synchronous handler is over before anything could cancel it: no bookkeeping needed.
    if (!isPromiseLike(result)) {
      settled('ok');
      return this.successReply(call, result, version);
    }
    this.#track(call);
    if (this.closeInfo) call.abort(closedError(this.closeInfo)); // the handler closed the connection itself
    return Promise.resolve(result).then(
      (value) => {
        this.#ended(call);
        settled('ok');
        if (this.closeInfo) return undefined;
        return this.settledReply(call, value, version);
      },
      (err: unknown) => {
        this.#ended(call);
        settled('error');
        if (this.closeInfo) return undefined;
        return errorReply(call, err, version, this.config.exposeErrorDetails);
      },
    );
  }

  /**
   * A request's `tracestate` (read only beside a valid traceparent) as its handler gets it: none
   * here. The browser client, which runs this class, takes none, and so does not carry the
   * check of one; the server's (IncomingDispatch) takes a valid one.
   */
  protected checkedTracestate(_tracestate: unknown): string | undefined {
    return undefined;
  }

  /** The reply to a call whose async handler resolved `result`: made now (the server's, later). */
  protected settledReply(call: RunningCall<S>, result: unknown, version: ProtocolVersion): Reply {
    return this.successReply(call, result, version);
  }

  /** The reply to a call whose handler returned `result` (the server's writes a kept text). */
  protected successReply(call: RunningCall<S>, result: unknown, version: ProtocolVersion): Reply {
    return successReply(call, result, version);
  }

  #track(call: RunningCall<S>): void {
    // Started once closed (its handler closed the connection): it outlives the close too.
    if (this.closeInfo) this.afterClose(1);
    const newest = this.#newest;
    if (newest) newest.newer = call;
    else this.#oldest = call;
    call.older = newest;
    this.#newest = call;
    this.#runningCount++;
  }

  /** A tracked call has settled: off the list, and told if it outlived the close. */
  #ended(call: RunningCall<S>): void {
    this.#finish(call);
    if (this.closeInfo) this.afterClose(-1);
  }

  /**
   * `runs` more (1) or fewer (-1) of the runs that outlive the connection's close: what a server
   * counts (IncomingDispatch); the client has nothing to do with them.
   */
  protected afterClose(_runs: number): void {}

  /** Take an ended call off the list; once only (after close, the list has let go of it). */
  #finish(call: RunningCall<S>): void {
    const { older, newer } = call;
    // Only the oldest call on the list has none older: any other without is off it.
    if (!older && this.#oldest !== call) return;
    if (older) older.newer = newer;
    else this.#oldest = newer;
    if (newer) newer.older = older;
    else this.#newest = older;
    call.older = call.newer = undefined;
    this.#runningCount--;
    this.callEnded();
  }

  /** A run has ended (settled, or let go by the close): a server waits on these (whenIdle). */
  protected callEnded(): void {}

  protected deliverNotification(method: string, params: Params | undefined): void {
    // A notification is a call whose caller wants no answer: run its handler if there is one,
    // within maxInFlight. Past it the handler is not run (logged); its observers still get it.
    const handler = this.config.registry.get(method);
    if (handler && this.inFlightCount < this.config.maxInFlight)
      this.#runForNotification(handler, method, params);
    else if (handler)
      this.#noise({ method }, 'notification handler not run: too many calls in flight');
    this.#hub?.next({ method, params });
  }

  #noise(fields: Record<string, unknown>, msg: string): void {
    const count = (notificationFailures.get(this) ?? 0) + 1;
    notificationFailures.set(this, count);
    logNoise(this.logger, count, fields, msg);
  }

  #runForNotification(handler: Handler<S>, method: string, params: Params | undefined): void {
    const call = new RunningCall(this.session, this.logger, undefined, method);
    this.#track(call);
    const report = (err: unknown): void => {
      this.#ended(call);
      if (call.aborted) return;
      this.#noise({ err, method }, 'notification handler failed');
    };
    try {
      const chain = this.config.middleware;
      const result = chain ? chain(call, true, params, handler) : handler(params, call);
      if (isPromiseLike(result)) Promise.resolve(result).then(() => this.#ended(call), report);
      else this.#ended(call);
    } catch (err) {
      report(err);
    }
  }

  #cancelRunning(params: Params | undefined): void {
    const id = params && !Array.isArray(params) ? (params as { id?: unknown }).id : undefined;
    if (typeof id !== 'string' && typeof id !== 'number') return;
    // The oldest running call with that id (ids of calls running together should differ).
    for (let call = this.#oldest; call; call = call.newer) {
      if (call.id === id) return call.abort(new Error('Cancelled by caller'));
    }
  }
}
