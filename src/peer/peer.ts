import type { Observable } from 'rxjs';
import { Subject } from 'rxjs';
import { parseFrame } from '../protocol/classify.js';
import type { ClassifyOptions, Incoming } from '../protocol/classify.js';
import {
  encodeBatch,
  encodeFailure,
  encodeNotification,
  encodeRequest,
  encodeSuccess,
} from '../protocol/encode.js';
import { ErrorCode, defaultErrorMessage } from '../protocol/error-codes.js';
import { isWireError, toWireError } from '../protocol/errors.js';
import { ConnectionClosedError } from '../protocol/local-errors.js';
import { ReservedMethod, isReservedMethod } from '../protocol/reserved.js';
import type { Params, ProtocolVersion, RequestId } from '../protocol/types.js';
import type { Transport, TransportListener } from '../transport/transport.js';
import { RunningCall } from './handler-context.js';
import { silentLogger } from './logger.js';
import type { Logger } from './logger.js';
import { nameOf } from './method-descriptor.js';
import type { MethodDescriptor, NotificationDescriptor } from './method-descriptor.js';
import { notificationsNamed } from './notifications.js';
import type { IncomingNotification } from './notifications.js';
import { MethodRegistry } from './method-registry.js';
import type { Handler } from './method-registry.js';
import { PendingCalls } from './pending-calls.js';
import type { CallOptions } from './pending-calls.js';

export interface PeerOptions<S> {
  /** Handlers for incoming calls; may be shared by many peers. */
  registry?: MethodRegistry<S>;
  /** Passed to handlers as `ctx.session`. */
  session: S;
  logger?: Logger;
  /** Default timeout for outgoing calls in ms; 0 waits forever. Default 30 000. */
  callTimeout?: number;
  /** Most outgoing calls awaiting a response at once. Default 1 024. */
  maxPendingCalls?: number;
  /** Most incoming calls running at once; beyond it calls get -32000 Server busy. Default 256. */
  maxInFlight?: number;
  /** Put internal error messages and stacks in `error.data` (debug only). Default false. */
  exposeErrorDetails?: boolean;
  /** Parsing limits and the JSON-RPC 1.0 switch. */
  parse?: ClassifyOptions;
  /**
   * Gather the calls and notifications made in one turn into one JSON-RPC batch
   * frame of at most this many members (for browsers, where a WebSocket cannot
   * be corked). 0 or undefined sends each on its own. Keep it at or below the
   * server's maxBatch.
   */
  batchOutgoing?: number;
  /**
   * Decide whether an incoming call or notification may run; false answers -32004
   * Unauthorized (a notification is dropped). Runs after the method is found.
   */
  authorize?: (
    method: string,
    params: Params | undefined,
    session: S,
  ) => boolean | Promise<boolean>;
  /**
   * Rate limit: `take()` is called for each incoming message (each batch member); for a request
   * false answers -32003 Rate limited, and a notification is dropped. Responses and invalid
   * messages (parse errors included) take a token too, so garbage spends the same budget as
   * calls, but are handled as usual whatever the answer: an invalid message still gets its
   * -32700/-32600 error (the spec's answer, no larger than a -32003), and a response the peer
   * is waiting for is still delivered.
   */
  admit?: { take(): boolean };
  /** Told once the connection has closed and everything has settled (an alternative to `closed` that allocates nothing). */
  onClosed?: (peer: Peer<S>, info: CloseInfo) => void;
  /** Told of every incoming call once it is answered, for metrics. */
  onCallSettled?: (method: string, outcome: CallOutcome, durationMs: number) => void;
  /** Handlers for reserved `rpc.` methods the layer above provides (e.g. rpc.discover). */
  reservedMethods?: ReadonlyMap<string, Handler<S>>;
  /** Reserved (`rpc.`) notifications other than cancel, for the layer above. */
  onReservedNotification?: (method: string, params: Params | undefined) => void;
}

/** The options every peer made from them shares, with their defaults filled in. */
export interface PeerConfig<S> {
  readonly registry: MethodRegistry<S>;
  readonly callTimeout: number;
  readonly maxPendingCalls: number;
  readonly maxInFlight: number;
  readonly exposeErrorDetails: boolean;
  readonly parse: ClassifyOptions;
  readonly batchOutgoing: number;
  readonly authorize: PeerOptions<S>['authorize'];
  readonly onClosed: PeerOptions<S>['onClosed'];
  readonly onCallSettled: PeerOptions<S>['onCallSettled'];
  readonly reservedMethods: PeerOptions<S>['reservedMethods'];
  readonly onReservedNotification: PeerOptions<S>['onReservedNotification'];
}

/** Resolve the shared part of `options` (everything but session, logger and admit). */
export function peerConfig<S>(options: Omit<PeerOptions<S>, 'session'>): PeerConfig<S> {
  return {
    registry: options.registry ?? new MethodRegistry<S>(),
    callTimeout: options.callTimeout ?? 30_000,
    maxPendingCalls: options.maxPendingCalls ?? 1024,
    maxInFlight: options.maxInFlight ?? 256,
    exposeErrorDetails: options.exposeErrorDetails ?? false,
    parse: options.parse ?? {},
    batchOutgoing: options.batchOutgoing ?? 0,
    authorize: options.authorize,
    onClosed: options.onClosed,
    onCallSettled: options.onCallSettled,
    reservedMethods: options.reservedMethods,
    onReservedNotification: options.onReservedNotification,
  };
}

/** How an incoming call ended, as metrics see it. */
export type CallOutcome = 'ok' | 'error' | 'not_found' | 'rejected';

export type { IncomingNotification } from './notifications.js';

export interface BatchEntry {
  method: string;
  params?: Params;
  /** Send as a notification: no id, no response. */
  notification?: boolean;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

/** A reply, plus work to run once its text is on the wire (ctx.afterReply). */
export interface HookedReply {
  text: string;
  afterSend: () => void;
}
export type Reply = string | HookedReply | undefined;

/**
 * Lines about protocol noise from the other side (responses nobody waits for, malformed ones)
 * logged at warn per connection; later ones go to debug, so a peer cannot flood the log.
 */
export const NOISE_WARN_LIMIT = 10;

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function failure(id: RequestId, code: number, version: ProtocolVersion, data?: unknown): string {
  const message = defaultErrorMessage[code] ?? 'Server error';
  return encodeFailure(
    id,
    data === undefined ? { code, message } : { code, message, data },
    version,
  );
}

/**
 * One end of a JSON-RPC connection, the same on server and client: it answers
 * incoming calls from its registry, makes outgoing calls, and exposes incoming
 * notifications as Observables. It owns nothing but the transport it is given;
 * `teardown` is the single place where a connection's state is released.
 */
export class Peer<S = unknown> implements TransportListener {
  readonly session: S;
  readonly logger: Logger;
  /** Settings shared by every peer made from the same options (one object for thousands). */
  protected readonly config: PeerConfig<S>;
  private readonly admit: PeerOptions<S>['admit'];
  private pendingTable: PendingCalls | undefined;
  // Allocated on first use: most connections never need them, and a gateway holds thousands.
  private running: Set<RunningCall<S>> | undefined;
  private runningById: Map<RequestId, RunningCall<S>> | undefined;
  private subject: Subject<IncomingNotification> | undefined;
  private closedPromise: Promise<CloseInfo> | undefined;
  private acceptingCalls = true;
  /** Calls waiting for an async authorize hook (counted in flight). */
  private authorizing = 0;
  private outbox: string[] | undefined;
  /** Protocol noise seen so far (see NOISE_WARN_LIMIT). */
  private noise = 0;
  protected closeInfo: CloseInfo | undefined;
  private resolveClosed: ((info: CloseInfo) => void) | undefined;

  /**
   * `config` is what `peerConfig(options)` returns; a server making a peer per connection
   * resolves it once and passes it to each, so only `session`, `logger` and `admit` are read
   * from `options` per peer.
   */
  constructor(
    private readonly transport: Transport,
    options: PeerOptions<S>,
    config: PeerConfig<S> = peerConfig(options),
  ) {
    this.config = config;
    this.session = options.session;
    this.logger = options.logger ?? silentLogger;
    this.admit = options.admit;
    // The peer is its transport's listener: no closures per connection.
    transport.listen(this);
  }

  /** Handlers for incoming calls. */
  get registry(): MethodRegistry<S> {
    return this.config.registry;
  }

  get isClosed(): boolean {
    return this.closeInfo !== undefined;
  }

  /** Outgoing calls awaiting a response. */
  get pendingCount(): number {
    return this.pendingTable?.size ?? 0;
  }

  /** Outgoing calls awaiting a response; the table is made on the first call out. */
  private get pending(): PendingCalls {
    return (this.pendingTable ??= new PendingCalls(
      this.config.maxPendingCalls,
      this.config.callTimeout,
      (id) => this.sendCancel(id),
    ));
  }

  /** TransportListener: the transport has closed. */
  transportClosed(code: number, reason: string): void {
    this.teardown(code, reason);
  }

  /** Settles once, when the connection has closed and every call has settled. */
  get closed(): Promise<CloseInfo> {
    if (!this.closedPromise) {
      this.closedPromise = this.closeInfo
        ? Promise.resolve(this.closeInfo)
        : new Promise((resolve) => (this.resolveClosed = resolve));
    }
    return this.closedPromise;
  }

  /** Every incoming notification (reserved `rpc.` ones excluded). Completes on close. */
  get notifications$(): Observable<IncomingNotification> {
    return this.notificationSubject().asObservable();
  }

  private notificationSubject(): Subject<IncomingNotification> {
    if (!this.subject) {
      this.subject = new Subject();
      if (this.closeInfo) this.subject.complete();
    }
    return this.subject;
  }

  /** Incoming calls whose handlers are still running. */
  /** Incoming calls being authorized or run: what a drain or a half-close waits for. */
  get inFlightCount(): number {
    return (this.running?.size ?? 0) + this.authorizing;
  }

  get bufferedAmount(): number {
    return this.transport.bufferedAmount;
  }

  /** Notifications of one method, as their params. */
  notificationsOf<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P> | string,
  ): Observable<P> {
    return notificationsNamed(this.notificationSubject(), descriptor);
  }

  /** Call a method on the other side and await its result. */
  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    params: NoInfer<P>,
    options?: CallOptions,
  ): Promise<R>;
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options?: CallOptions,
  ): Promise<unknown> {
    const method = nameOf(target);
    if (this.closeInfo) return Promise.reject(this.closedError());
    let opened: { id: number; promise: Promise<unknown> };
    try {
      opened = this.pending.open(method, options);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    let frame: string;
    try {
      frame = encodeRequest(opened.id, method, params);
    } catch (err) {
      this.pending.fail(opened.id, err);
      return opened.promise;
    }
    this.sendOutgoing(frame);
    return opened.promise;
  }

  /** Send a notification. Throws ConnectionClosedError when the connection is closed. */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    params: NoInfer<P>,
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    if (this.closeInfo) throw this.closedError();
    const method = nameOf(target);
    this.sendOutgoing(encodeNotification(method, params));
  }

  /**
   * Send several calls and notifications in one frame. Resolves with one
   * settled result per entry, in order; notifications are fulfilled with undefined.
   */
  async batch(
    entries: readonly BatchEntry[],
    options?: CallOptions,
  ): Promise<PromiseSettledResult<unknown>[]> {
    if (this.closeInfo) throw this.closedError();
    if (entries.length === 0) return [];
    const parts: string[] = [];
    const promises: Promise<unknown>[] = [];
    const opened: number[] = [];
    try {
      for (const entry of entries) {
        if (entry.notification) {
          parts.push(encodeNotification(entry.method, entry.params));
          promises.push(Promise.resolve(undefined));
        } else {
          const call = this.pending.open(entry.method, options);
          opened.push(call.id);
          parts.push(encodeRequest(call.id, entry.method, entry.params));
          promises.push(call.promise);
        }
      }
    } catch (err) {
      for (const id of opened) this.pending.fail(id, err);
      await Promise.allSettled(promises);
      throw err;
    }
    this.transport.send(encodeBatch(parts));
    return Promise.allSettled(promises);
  }

  /**
   * From now on answer incoming requests with -32006 Shutting down (used while
   * draining: the calls already running finish, new ones are refused).
   */
  stopAcceptingCalls(): void {
    this.acceptingCalls = false;
  }

  /** Close the connection. Pending calls reject and running handlers are aborted at once. */
  close(code = 1000, reason = ''): void {
    if (this.closeInfo) return;
    this.transport.close(code, reason);
    this.teardown(code, reason);
  }

  /** Handle one incoming frame. Public so a transport-less host can feed text in. */
  receive(text: string): void {
    if (this.closeInfo) return;
    const frame = parseFrame(text, this.config.parse);
    if (!frame.batch) {
      const reply = this.handle(frame.messages[0]!);
      if (reply === undefined) return;
      if (isPromiseLike(reply)) void reply.then((r) => r !== undefined && this.sendReply(r));
      else this.sendReply(reply);
      return;
    }
    this.handleBatch(frame.messages);
  }

  private handleBatch(messages: Incoming[]): void {
    const replies = messages.map((m) => this.handle(m));
    const sync: Reply[] = [];
    for (const reply of replies) {
      if (isPromiseLike(reply)) {
        // Members run concurrently; the one reply waits for the slowest.
        void Promise.all(replies.map((r) => Promise.resolve(r))).then((settled) =>
          this.sendBatchReply(settled),
        );
        return;
      }
      sync.push(reply);
    }
    this.sendBatchReply(sync);
  }

  private sendBatchReply(replies: Reply[]): void {
    const parts: string[] = [];
    const hooks: (() => void)[] = [];
    for (const reply of replies) {
      if (reply === undefined) continue;
      if (typeof reply === 'string') {
        parts.push(reply);
      } else {
        parts.push(reply.text);
        hooks.push(reply.afterSend);
      }
    }
    // Spec 6: nothing at all is returned for a batch of notifications only.
    if (parts.length === 0 || this.closeInfo) return;
    this.transport.send(encodeBatch(parts));
    for (const hook of hooks) this.runAfterSend(hook);
  }

  private sendReply(reply: string | HookedReply): void {
    if (this.closeInfo) return;
    if (typeof reply === 'string') {
      this.transport.send(reply);
      return;
    }
    this.transport.send(reply.text);
    this.runAfterSend(reply.afterSend);
  }

  protected runAfterSend(hook: () => void): void {
    try {
      hook();
    } catch (err) {
      this.logger.error({ err }, 'afterReply hook failed');
    }
  }

  private success(call: RunningCall<S>, result: unknown, version: ProtocolVersion): Reply {
    const id = call.id ?? null;
    if (call.aborted) return failure(id, ErrorCode.RequestCancelled, version);
    const text = encodeSuccess(id, result, version);
    return call.afterSend ? { text, afterSend: call.afterSend } : text;
  }

  /** Returns the reply text, a promise of it, or undefined when nothing is to be sent. */
  protected handle(message: Incoming): Reply | Promise<Reply> {
    switch (message.kind) {
      case 'request':
        return this.handleRequest(message.id, message.method, message.params, message.version);
      case 'notification':
        this.handleNotification(message.method, message.params);
        return undefined;
      case 'success':
        this.admit?.take();
        if (!this.pendingTable?.resolve(message.id, message.result)) this.logUnmatched(message.id);
        return undefined;
      case 'failure':
        this.admit?.take();
        if (!this.pendingTable?.reject(message.id, message.error))
          this.logUnmatched(message.id, message.error);
        return undefined;
      case 'invalid':
        this.admit?.take();
        return encodeFailure(message.id, message.error, message.version);
      case 'bad-response':
        this.admit?.take();
        this.logNoise({ reason: message.reason }, 'dropped a malformed response');
        return undefined;
    }
  }

  private handleRequest(
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
  ): Reply | Promise<Reply> {
    // Liveness probes are answered even while draining or rate limited: they cost nothing.
    if (method === ReservedMethod.Ping) return encodeSuccess(id, 'pong', version);
    if (!this.acceptingCalls) {
      this.config.onCallSettled?.(method, 'rejected', 0);
      return failure(id, ErrorCode.ShuttingDown, version);
    }
    if (this.admit && !this.admit.take()) {
      this.config.onCallSettled?.(method, 'rejected', 0);
      return failure(id, ErrorCode.RateLimited, version);
    }
    if (isReservedMethod(method)) {
      const internal = this.config.reservedMethods?.get(method);
      if (internal) return this.runHandler(internal, id, method, params, version);
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
    if (!this.config.authorize) return this.runHandler(handler, id, method, params, version);
    const verdict = this.askAuthorize(method, params);
    if (!isPromiseLike(verdict)) {
      return verdict
        ? this.runHandler(handler, id, method, params, version)
        : this.unauthorized(id, method, version);
    }
    this.authorizing++;
    return Promise.resolve(verdict).then(
      (allowed) => {
        this.authorizing--;
        return allowed
          ? this.runHandler(handler, id, method, params, version)
          : this.unauthorized(id, method, version);
      },
      (err: unknown) => {
        this.authorizing--;
        this.logger.error({ err, method }, 'authorize hook failed');
        return failure(id, ErrorCode.InternalError, version);
      },
    );
  }

  /** The authorize hook's verdict; a hook that throws counts as a failed (rejected) promise. */
  private askAuthorize(method: string, params: Params | undefined): boolean | PromiseLike<boolean> {
    try {
      return this.config.authorize!(method, params, this.session);
    } catch (err) {
      return Promise.reject(err as Error);
    }
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
  ): Reply | Promise<Reply> {
    const started = this.config.onCallSettled ? performance.now() : 0;
    const settled = (outcome: CallOutcome): void =>
      this.config.onCallSettled?.(method, outcome, performance.now() - started);
    const call = new RunningCall(this.session, this.logger, id, method);
    let result: unknown;
    try {
      result = handler(params, call);
    } catch (err) {
      settled('error');
      return this.encodeError(call, err, version);
    }
    // A synchronous handler is over before anything could cancel it: no bookkeeping needed.
    if (!isPromiseLike(result)) {
      settled('ok');
      return this.success(call, result, version);
    }
    this.track(call);
    if (this.closeInfo) call.abort(this.closedError()); // the handler closed the connection itself
    return Promise.resolve(result).then(
      (value) => {
        this.finish(call);
        settled('ok');
        if (this.closeInfo) return undefined;
        return this.success(call, value, version);
      },
      (err: unknown) => {
        this.finish(call);
        settled('error');
        if (this.closeInfo) return undefined;
        return this.encodeError(call, err, version);
      },
    );
  }

  private encodeError(call: RunningCall<S>, err: unknown, version: ProtocolVersion): string {
    const id = call.id ?? null;
    if (call.aborted) return failure(id, ErrorCode.RequestCancelled, version);
    if (!isWireError(err)) {
      this.logger.error({ err, method: call.method }, 'handler failed');
    }
    return encodeFailure(id, toWireError(err, this.config.exposeErrorDetails), version);
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

  private handleNotification(method: string, params: Params | undefined): void {
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
    handler: (params: unknown, ctx: RunningCall<S>) => unknown,
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
      const result = handler(params, call);
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

  private sendCancel(id: number): void {
    if (!this.closeInfo) this.sendOutgoing(encodeNotification(ReservedMethod.Cancel, { id }));
  }

  /** Requests and notifications go through here, to be gathered into a batch when asked. */
  private sendOutgoing(frame: string): void {
    if (this.config.batchOutgoing <= 1) {
      this.transport.send(frame);
      return;
    }
    const outbox = (this.outbox ??= []);
    if (outbox.push(frame) === 1) queueMicrotask(() => this.flushOutbox());
    else if (outbox.length >= this.config.batchOutgoing) this.flushOutbox();
  }

  private flushOutbox(): void {
    const frames = this.outbox;
    if (!frames || frames.length === 0 || this.closeInfo) return;
    this.outbox = undefined;
    this.transport.send(frames.length === 1 ? frames[0]! : encodeBatch(frames));
  }

  private logUnmatched(id: RequestId, error?: unknown): void {
    if (this.pendingTable?.wasAbandoned(id)) {
      this.logger.debug({ id }, 'late response to a call given up locally');
    } else {
      this.logNoise({ id, error }, 'dropped a response that matches no pending call');
    }
  }

  /** Log protocol noise: the first NOISE_WARN_LIMIT lines at warn, the rest at debug, counted. */
  private logNoise(fields: Record<string, unknown>, msg: string): void {
    const count = ++this.noise;
    if (count < NOISE_WARN_LIMIT) this.logger.warn({ ...fields, count }, msg);
    else if (count === NOISE_WARN_LIMIT)
      this.logger.warn({ ...fields, count, moreAtDebug: true }, msg);
    else this.logger.debug({ ...fields, count }, msg);
  }

  private closedError(): ConnectionClosedError {
    const info = this.closeInfo;
    return new ConnectionClosedError('Connection closed', info?.code, info?.reason);
  }

  /** The one place a connection's state is released; runs once. */
  private teardown(code: number, reason: string): void {
    if (this.closeInfo) return;
    this.closeInfo = { code, reason };
    const error = this.closedError();
    this.pendingTable?.rejectAll(error);
    if (this.running) for (const call of this.running) call.abort(error);
    this.running = undefined;
    this.runningById = undefined;
    this.subject?.complete();
    this.resolveClosed?.(this.closeInfo);
    this.config.onClosed?.(this, this.closeInfo);
  }
}
