import { Subject } from 'rxjs';
import { encodeSuccess } from '../protocol/encode.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { ReservedMethod, isReservedMethod } from '../protocol/reserved.js';
import type { Params, ProtocolVersion, RequestId } from '../protocol/types.js';
import { RunningCall } from './handler-context.js';
import type { Logger } from './logger.js';
import type { Handler } from './method-registry.js';
import type { MiddlewareChain } from './middleware.js';
import type { IncomingNotification } from './notifications.js';
import { closedError } from './peer-options.js';
import type { CallOutcome, CloseInfo, PeerConfig, PeerOptions } from './peer-options.js';
import { errorReply, failure, isPromiseLike, successReply } from './replies.js';
import type { Reply } from './replies.js';

/*
 * The answering side of a Peer: incoming requests and notifications (admission while draining,
 * rate and in-flight limits, authorization, running the handler, building the reply), the
 * calls still running (for rpc.cancel, drains and close), and the observers of incoming
 * notifications. Apart from Peer, which keeps the frames, the responses and the outgoing
 * calls. The Peer makes it on first use, so an idle connection does not carry it.
 */

export class IncomingDispatch<S> {
  // Allocated on first use: most connections never need them, and a gateway holds thousands.
  private running: Set<RunningCall<S>> | undefined;
  private runningById: Map<RequestId, RunningCall<S>> | undefined;
  private subject: Subject<IncomingNotification> | undefined;
  private acceptingCalls = true;
  /** Calls waiting for an async authorize hook (counted in flight). */
  private authorizing = 0;

  constructor(
    private readonly session: S,
    private readonly logger: Logger,
    private readonly config: PeerConfig<S>,
    private readonly admit: PeerOptions<S>['admit'],
    /** Set by `close`; given here when the Peer makes this after it has closed. */
    private closeInfo: CloseInfo | undefined,
  ) {}

  /** Incoming calls being authorized or run: what a drain or a half-close waits for. */
  get inFlightCount(): number {
    return (this.running?.size ?? 0) + this.authorizing;
  }

  /** See Peer.stopAcceptingCalls. */
  stopAcceptingCalls(): void {
    this.acceptingCalls = false;
  }

  notificationSubject(): Subject<IncomingNotification> {
    if (!this.subject) {
      this.subject = new Subject();
      if (this.closeInfo) this.subject.complete();
    }
    return this.subject;
  }

  /** Answer one request: the reply text, or a promise of it. */
  request(
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    traceparent?: string,
  ): Reply | Promise<Reply> {
    // A liveness probe is answered even while draining (the session is there until it closes),
    // but takes a rate token like any request: a flood of them is a flood.
    if (method === ReservedMethod.Ping) {
      if (this.admit && !this.admit.take()) return this.rateLimited(id, method, version);
      return encodeSuccess(id, 'pong', version);
    }
    if (!this.acceptingCalls) {
      this.config.onCallSettled?.(method, 'rejected', 0);
      return failure(id, ErrorCode.ShuttingDown, version);
    }
    if (this.admit && !this.admit.take()) return this.rateLimited(id, method, version);
    if (this.config.gate && method !== ReservedMethod.Authenticate) {
      const refusal = this.config.gate(method, this.session);
      if (refusal) {
        this.config.onCallSettled?.(method, 'rejected', 0);
        return failure(id, refusal.code, version, refusal.data);
      }
    }
    if (isReservedMethod(method)) {
      const internal = this.config.reservedMethods?.get(method);
      // The gateway's own methods are not the application's calls: no middleware around them.
      if (internal) {
        return this.runHandler(internal, id, method, params, version, undefined, traceparent);
      }
      return failure(id, ErrorCode.MethodNotFound, version);
    }
    const handler = this.config.registry.get(method);
    if (!handler) {
      this.config.onCallSettled?.(method, 'not_found', 0);
      return failure(id, ErrorCode.MethodNotFound, version);
    }
    if (this.inFlightCount >= this.config.maxInFlight) {
      this.config.onCallSettled?.(method, 'rejected', 0);
      return failure(id, ErrorCode.ServerBusy, version, { maxInFlight: this.config.maxInFlight });
    }
    const chain = this.config.middleware;
    if (!this.config.authorize) {
      return this.runHandler(handler, id, method, params, version, chain, traceparent);
    }
    const verdict = this.askAuthorize(method, params);
    if (!isPromiseLike(verdict)) {
      return verdict
        ? this.runHandler(handler, id, method, params, version, chain, traceparent)
        : this.unauthorized(id, method, version);
    }
    this.authorizing++;
    return Promise.resolve(verdict).then(
      (allowed) => {
        this.authorizing--;
        return allowed
          ? this.runHandler(handler, id, method, params, version, chain, traceparent)
          : this.unauthorized(id, method, version);
      },
      (err: unknown) => {
        this.authorizing--;
        this.logger.error({ err, method }, 'authorize hook failed');
        return failure(id, ErrorCode.InternalError, version);
      },
    );
  }

  /** Take one notification: rpc.cancel, another reserved one, or one for handlers and observers. */
  notification(method: string, params: Params | undefined): void {
    if (method !== ReservedMethod.Cancel && this.config.gate?.(method, this.session)) {
      this.logger.debug({ method }, 'notification dropped: not authenticated');
      return;
    }
    if (isReservedMethod(method)) {
      if (method === ReservedMethod.Cancel) this.cancelRunning(params);
      else this.config.onReservedNotification?.(method, params);
      return;
    }
    if (this.admit && !this.admit.take()) {
      this.logger.debug({ method }, 'notification dropped: rate limited');
      return;
    }
    if (!this.config.authorize) {
      this.deliverNotification(method, params);
      return;
    }
    const verdict = this.askAuthorize(method, params);
    if (!isPromiseLike(verdict)) {
      if (verdict) this.deliverNotification(method, params);
      return;
    }
    Promise.resolve(verdict).then(
      (allowed) => allowed && !this.closeInfo && this.deliverNotification(method, params),
      (err: unknown) => this.logger.error({ err, method }, 'authorize hook failed'),
    );
  }

  /** The connection has closed: abort the running calls and complete the notifications. */
  close(info: CloseInfo, error: Error): void {
    this.closeInfo = info;
    if (this.running) for (const call of this.running) call.abort(error);
    this.running = undefined;
    this.runningById = undefined;
    this.subject?.complete();
  }

  /** The authorize hook's verdict; a hook that throws counts as a failed (rejected) promise. */
  private askAuthorize(method: string, params: Params | undefined): boolean | PromiseLike<boolean> {
    try {
      return this.config.authorize!(method, params, this.session);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  private rateLimited(id: RequestId, method: string, version: ProtocolVersion): string {
    this.config.onCallSettled?.(method, 'rejected', 0);
    return failure(id, ErrorCode.RateLimited, version);
  }

  private unauthorized(id: RequestId, method: string, version: ProtocolVersion): string {
    this.config.onCallSettled?.(method, 'rejected', 0);
    return failure(id, ErrorCode.Unauthorized, version);
  }

  private runHandler(
    handler: Handler<S>,
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    chain: MiddlewareChain<S> | undefined,
    traceparent: string | undefined,
  ): Reply | Promise<Reply> {
    const started = this.config.onCallSettled ? performance.now() : 0;
    const settled = (outcome: CallOutcome): void =>
      this.config.onCallSettled?.(method, outcome, performance.now() - started);
    const call = new RunningCall(this.session, this.logger, id, method, traceparent);
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
      return successReply(call, result, version);
    }
    this.track(call);
    if (this.closeInfo) call.abort(closedError(this.closeInfo)); // the handler closed the connection itself
    return Promise.resolve(result).then(
      (value) => {
        this.finish(call);
        settled('ok');
        if (this.closeInfo) return undefined;
        return successReply(call, value, version);
      },
      (err: unknown) => {
        this.finish(call);
        settled('error');
        if (this.closeInfo) return undefined;
        return errorReply(call, err, version, this.config.exposeErrorDetails);
      },
    );
  }

  private track(call: RunningCall<S>): void {
    (this.running ??= new Set()).add(call);
    const byId = (this.runningById ??= new Map());
    if (call.id !== undefined && !byId.has(call.id)) byId.set(call.id, call);
  }

  private finish(call: RunningCall<S>): void {
    this.running?.delete(call);
    if (call.id !== undefined && this.runningById?.get(call.id) === call) {
      this.runningById.delete(call.id);
    }
  }

  private deliverNotification(method: string, params: Params | undefined): void {
    // A notification is a call whose caller wants no answer: run its handler if there is one.
    const handler = this.config.registry.get(method);
    if (handler && this.inFlightCount >= this.config.maxInFlight) {
      this.logger.debug({ method }, 'notification dropped: too many calls in flight');
      return;
    }
    if (handler) this.runForNotification(handler, method, params);
    this.subject?.next({ method, params });
  }

  private runForNotification(
    handler: Handler<S>,
    method: string,
    params: Params | undefined,
  ): void {
    const call = new RunningCall(this.session, this.logger, undefined, method);
    this.track(call);
    const report = (err: unknown): void => {
      this.finish(call);
      if (!call.aborted) this.logger.warn({ err, method }, 'notification handler failed');
    };
    try {
      const chain = this.config.middleware;
      const result = chain ? chain(call, true, params, handler) : handler(params, call);
      if (isPromiseLike(result)) Promise.resolve(result).then(() => this.finish(call), report);
      else this.finish(call);
    } catch (err) {
      report(err);
    }
  }

  private cancelRunning(params: Params | undefined): void {
    const id = params && !Array.isArray(params) ? (params as { id?: unknown }).id : undefined;
    if (typeof id !== 'string' && typeof id !== 'number') return;
    this.runningById?.get(id)?.abort(new Error('Cancelled by caller'));
  }
}
