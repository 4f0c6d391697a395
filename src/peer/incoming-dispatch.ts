import { encodeSuccessText } from '../protocol/encode.js';
import { ErrorCode } from '../protocol/error-codes.js';
import { ReservedMethod, isReservedMethod } from '../protocol/reserved.js';
import { tracestateOf } from '../protocol/traceparent.js';
import type { Params, ProtocolVersion, RequestId } from '../protocol/types.js';
import { IncomingCalls } from './incoming-calls.js';
import type { Logger } from './logger.js';
import type { Handler } from './method-registry.js';
import type { RunningCall } from './handler-context.js';
import type { CloseInfo, PeerConfig, PeerOptions } from './peer-options.js';
import { keptResultText } from './result-text.js';
import {
  BATCH_MADE_AT_ONCE_CHARS,
  MadeLater,
  failure,
  isPromiseLike,
  replyChars,
} from './replies.js';
import { settledOrAfter } from './settled-or-after.js';
import type { Reply } from './replies.js';
import type { Transport } from '../transport/transport.js';

/*
 * The answering side of a server's peer: IncomingCalls (incoming-calls.ts) plus what a server
 * asks before it runs anything, in this order: draining (-32006), the rate limit (-32003, asked
 * of every message, rpc.ping included), the identity gate, and, once the handler is found
 * within maxInFlight, `authorize` (-32004). A reserved method with a result given as text
 * (reservedResults: rpc.discover's document) is answered with it after the gate, within
 * maxInFlight. Apart so that the browser client does not carry it.
 */

export class IncomingDispatch<S> extends IncomingCalls<S> {
  private acceptingCalls = true;
  /** Calls waiting for an async authorize hook (counted in flight). */
  private authorizing = 0;
  /**
   * Runs the close left going (handlers told by their signal, which they may not heed; authorize
   * hooks waited on) and not settled yet; and what to call once none is left (afterRuns).
   */
  private outliving = 0;
  private whenSettled: (() => void) | undefined;
  /** What to call once no call or authorize hook is running, or the close (whenIdle). */
  private whenNoneRunning: (() => void)[] | undefined;
  /** Runs started for the connection that nothing waits for any more (holdWhile). */
  private detached = 0;

  constructor(
    session: S,
    logger: Logger,
    config: PeerConfig<S>,
    private readonly admit: PeerOptions<S>['admit'],
    closeInfo: CloseInfo | undefined,
  ) {
    super(session, logger, config, closeInfo);
  }

  /** Incoming calls being authorized or run: what a drain or a half-close waits for. */
  override get inFlightCount(): number {
    return super.inFlightCount + this.authorizing;
  }

  /** A call refused before it ran (draining, the rate limit, authorize), counted as such. */
  private rejected(id: RequestId, method: string, version: ProtocolVersion, code: number): string {
    this.config.onCallSettled?.(method, 'rejected', 0);
    return failure(id, code, version);
  }

  /**
   * A call answered here, not by a handler (a reserved result, an authorize hook that failed),
   * counted with the time since it `arrived`.
   */
  private answered(method: string, outcome: 'ok' | 'error', arrived: number | undefined): void {
    this.config.onCallSettled?.(
      method,
      outcome,
      arrived === undefined ? 0 : performance.now() - arrived,
    );
  }

  /** What is in flight at the close outlives it until it settles. */
  override close(info: CloseInfo): void {
    this.outliving = this.inFlightCount + this.detached;
    super.close(info);
    this.idleCheck();
  }

  /**
   * A run started for this connection that nothing waits for any more (an identity hook given
   * up on): once the connection has closed it holds what a handler left running holds, until it
   * settles or `maxMs` has passed (a run that never settles must not hold it for good).
   */
  holdWhile(run: PromiseLike<unknown>, maxMs: number): void {
    this.detached++;
    settledOrAfter(run, maxMs, () => {
      this.detached--;
      if (this.closeInfo) this.afterClose(-1);
    });
  }

  /**
   * `done` once every run the connection's close left going has settled (at once when none
   * is): until then what they hold (their params, the session) is still the connection's.
   */
  afterRuns(done: () => void): void {
    // Looked at once the turn's synchronous work is done: a handler that closed its own
    // connection is counted only when it returns its promise, after the close hook that asks.
    queueMicrotask(() => {
      if (this.outliving === 0) done();
      else this.whenSettled = done;
    });
  }

  /**
   * `done` once no call or notification handler, nor authorize hook, is running, or the
   * connection has closed (at once when either is so). What a close left going is afterRuns'
   * to wait for.
   */
  whenIdle(done: () => void): void {
    // Looked at once the turn's synchronous work is done, as afterRuns does.
    queueMicrotask(() => {
      if (this.inFlightCount === 0 || this.closeInfo) done();
      else (this.whenNoneRunning ??= []).push(done);
    });
  }

  protected override callEnded(): void {
    this.idleCheck();
  }

  private idleCheck(): void {
    // Checked at the end of every call: nothing to look at unless someone waits.
    const waiting = this.whenNoneRunning;
    if (waiting === undefined || (this.inFlightCount > 0 && !this.closeInfo)) return;
    this.whenNoneRunning = undefined;
    for (const done of waiting) done();
  }

  protected override afterClose(runs: number): void {
    this.outliving += runs;
    if (this.outliving > 0) return;
    const done = this.whenSettled;
    this.whenSettled = undefined;
    done?.();
  }

  /** An authorize hook is asked and waited on: in flight, and outliving the close if after it. */
  private hookStarted(): void {
    this.authorizing++;
    if (this.closeInfo) this.afterClose(1);
  }

  /** An authorize hook has decided (or failed): one fewer waited on. */
  private hookSettled(): void {
    this.authorizing--;
    if (this.closeInfo) this.afterClose(-1);
    this.idleCheck();
  }

  /** See Peer.stopAcceptingCalls. */
  stopAcceptingCalls(): void {
    this.acceptingCalls = false;
  }

  override request(
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    traceparent?: string,
    tracestate?: unknown,
  ): Reply | Promise<Reply> {
    // Closed by a member of the same frame (a handler that closes its own connection): the
    // members after it are not run, as a frame read after the close is not.
    if (this.closeInfo) return undefined;
    // A call's duration runs from here, authorize included; the clock is read only for a peer
    // that records durations.
    const arrived = this.config.onCallSettled ? performance.now() : undefined;
    // A liveness probe is answered even while draining (the session is there until it closes),
    // but takes a rate token like any request: a flood of them is a flood.
    const ping = method === ReservedMethod.Ping;
    if (!ping && !this.acceptingCalls) {
      return this.rejected(id, method, version, ErrorCode.ShuttingDown);
    }
    if (this.admit && !this.admit.take()) {
      return this.rejected(id, method, version, ErrorCode.RateLimited);
    }
    if (!ping && this.config.gate && method !== ReservedMethod.Authenticate) {
      const refusal = this.config.gate(method, this.session);
      if (refusal) {
        this.config.onCallSettled?.(method, 'rejected', 0);
        return failure(id, refusal.code, version, refusal.data);
      }
    }
    const result = isReservedMethod(method) ? this.config.reservedResults?.get(method) : undefined;
    if (result !== undefined) {
      // Its text as it is, no handler to run. Beyond maxInFlight it is refused as IncomingCalls
      // refuses any call (-32000, `data: { maxInFlight }`), written here so that the browser
      // client, which carries IncomingCalls, carries none of this.
      const { maxInFlight } = this.config;
      if (this.inFlightCount >= maxInFlight) {
        this.config.onCallSettled?.(method, 'rejected', 0);
        return failure(id, ErrorCode.ServerBusy, version, { maxInFlight });
      }
      const reply = encodeSuccessText(id, result, version);
      this.answered(method, 'ok', arrived);
      return reply;
    }
    return super.request(id, method, params, version, traceparent, tracestate, arrived);
  }

  /**
   * A request's `tracestate` as its handler gets it: valid per the W3C grammar and bounds, its
   * members as they go on (tracestateOf); else none, and the call goes on with its traceparent.
   */
  protected override checkedTracestate(tracestate: unknown): string | undefined {
    return tracestateOf(tracestate);
  }

  /** A result kept as its upstream wrote it goes as that text (result-text.ts). */
  /**
   * Made as it is written (MadeLater, Transport.sendMade): many async handlers settling together
   * have their replies made a turn's worth at a time, as the transport writes them.
   */
  protected override settledReply(
    call: RunningCall<S>,
    result: unknown,
    version: ProtocolVersion,
  ): Reply {
    return this.madeLater(call, result, version);
  }

  /**
   * While a batch's members are handled (Peer.handleBatch): the characters of their replies made
   * so far. Undefined outside a batch.
   */
  batchMade: number | undefined = undefined;

  /**
   * The connection's transport, set by the peer: whether a frame sent now would wait for an
   * output turn (a reply made now would be made ahead of its write), and where a batch member's
   * reply made ahead of its write is counted toward the turn's output.
   */
  output: Pick<Transport, 'outputWaits' | 'chargeOutput'> | undefined = undefined;

  /**
   * A batch's member is answered as its handler returned, its text made now, until the batch's
   * replies made reach BATCH_MADE_AT_ONCE_CHARS or the turn's output is spent; past that its
   * text is made as the batch's reply is written (MadeLater, batchPieces), a turn's worth at a
   * time.
   */
  protected override successReply(
    call: RunningCall<S>,
    result: unknown,
    version: ProtocolVersion,
  ): Reply {
    const made = this.batchMade;
    if (made === undefined) return this.madeReply(call, result, version);
    if (made >= BATCH_MADE_AT_ONCE_CHARS || this.output?.outputWaits?.()) {
      return this.madeLater(call, result, version);
    }
    const reply = this.madeReply(call, result, version);
    const chars = replyChars(reply);
    this.batchMade = made + chars;
    this.output?.chargeOutput?.(chars);
    return reply;
  }

  private madeLater(call: RunningCall<S>, result: unknown, version: ProtocolVersion): MadeLater {
    return new MadeLater(() => this.madeReply(call, result, version), call.id ?? null, version);
  }

  private madeReply(call: RunningCall<S>, result: unknown, version: ProtocolVersion): Reply {
    const text = call.aborted ? undefined : keptResultText(call, result);
    if (text === undefined) return super.successReply(call, result, version);
    const reply = encodeSuccessText(call.id ?? null, text, version);
    return call.afterSend ? { text: reply, afterSend: call.afterSend } : reply;
  }

  override notification(method: string, params: Params | undefined): void {
    if (this.closeInfo) return;
    // A reserved one (rpc.cancel, an unknown rpc.*) takes a token as every message does; the
    // application's take theirs in accept, after the gate.
    if (isReservedMethod(method) && this.admit && !this.admit.take()) {
      this.logger.debug({ method }, 'notification dropped: rate limited');
      return;
    }
    if (method !== ReservedMethod.Cancel && this.config.gate?.(method, this.session)) {
      this.logger.debug({ method }, 'notification dropped: not authenticated');
      return;
    }
    super.notification(method, params);
  }

  protected override run(
    handler: Handler<S>,
    id: RequestId,
    method: string,
    params: Params | undefined,
    version: ProtocolVersion,
    traceparent: string | undefined,
    tracestate: unknown,
    arrived: number | undefined,
  ): Reply | Promise<Reply> {
    if (!this.config.authorize) {
      return super.run(handler, id, method, params, version, traceparent, tracestate, arrived);
    }
    const verdict = this.askAuthorize(method, params);
    if (!isPromiseLike(verdict)) {
      return verdict
        ? super.run(handler, id, method, params, version, traceparent, tracestate, arrived)
        : this.rejected(id, method, version, ErrorCode.Unauthorized);
    }
    this.hookStarted();
    return Promise.resolve(verdict).then(
      (allowed) => {
        this.hookSettled();
        // Closed while the hook decided: no answer can be sent, and no handler runs for it.
        if (this.closeInfo) return undefined;
        return allowed
          ? super.run(handler, id, method, params, version, traceparent, tracestate, arrived)
          : this.rejected(id, method, version, ErrorCode.Unauthorized);
      },
      (err: unknown) => {
        this.hookSettled();
        this.logger.error({ err, method }, 'authorize hook failed');
        this.answered(method, 'error', arrived);
        return failure(id, ErrorCode.InternalError, version);
      },
    );
  }

  protected override accept(method: string, params: Params | undefined): void {
    if (this.admit && !this.admit.take()) {
      this.logger.debug({ method }, 'notification dropped: rate limited');
      return;
    }
    if (!this.config.authorize) {
      this.deliverNotification(method, params);
      return;
    }
    // A notification waiting on the hook holds its params as a call waiting on it does: within
    // maxInFlight with them, or one connection (or a POST of notifications, answered 204 at
    // once) could make the node hold any number while the hook is slow.
    if (this.inFlightCount >= this.config.maxInFlight) {
      this.logger.debug({ method }, 'notification dropped: too many calls in flight');
      return;
    }
    const verdict = this.askAuthorize(method, params);
    if (!isPromiseLike(verdict)) {
      if (verdict) this.deliverNotification(method, params);
      return;
    }
    this.hookStarted();
    Promise.resolve(verdict).then(
      (allowed) => {
        this.hookSettled();
        if (allowed && !this.closeInfo) this.deliverNotification(method, params);
      },
      (err: unknown) => {
        this.hookSettled();
        this.logger.error({ err, method }, 'authorize hook failed');
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
}
