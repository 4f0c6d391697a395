import type { Observable } from 'rxjs';
import { parseIncomingWith } from '../protocol/classify.js';
import type { Frame, Incoming } from '../protocol/classify.js';
import {
  encodeBatch,
  encodeFailure,
  encodeNotification,
  encodeRequest,
  withIdText,
} from '../protocol/encode.js';
import { InternalError } from '../protocol/errors.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params, RequestId } from '../protocol/types.js';
import type { Transport, TransportListener } from '../transport/transport.js';
import { IncomingCalls } from './incoming-calls.js';
import { silentLogger } from './logger.js';
import type { Logger } from './logger.js';
import { nameOf } from './method-descriptor.js';
import type { MethodDescriptor, NotificationDescriptor, ParamsArgs } from './method-descriptor.js';
import type { IncomingNotification } from './notifications.js';
import { logNoise, shownNoise } from './noise-log.js';
import { closedError } from './peer-options.js';
import type { CloseInfo, PeerConfig } from './peer-options.js';
import type { Peer } from './peer.js';
import { frameRefusals, PendingCalls } from './pending-calls.js';
import type { BatchWriter, CallOptions, WithdrawnCall } from './pending-calls.js';
import { batchReply, echoIdText, isPromiseLike } from './replies.js';
import type { HookedReply, Reply } from './replies.js';

export interface BatchEntry {
  method: string;
  params?: Params;
  /** Send as a notification: no id, no response. */
  notification?: boolean;
}

/**
 * The batch frame of `parts` (filled by the time it is asked for), and the `members` it holds:
 * what a refused batch is found by.
 */
function batchWriter(parts: readonly string[], members: number): BatchWriter {
  return Object.assign(() => encodeBatch(parts), { members });
}

/** Frames gathered for one batch (`batchOutgoing`), and the ids of the calls among them. */
interface Outbox {
  frames: string[];
  ids: number[];
}

/**
 * One end of a JSON-RPC connection, the same on server and client: it answers incoming calls
 * from its registry, makes outgoing calls, and exposes incoming notifications as an
 * Observable. It owns nothing but the transport it is given; `teardown` is the single place
 * where a connection's state is released. This file keeps the frames in and out, responses
 * and outgoing calls; answering the other side's calls and notifications is IncomingCalls'
 * (incoming-calls.ts). `Peer` (peer.ts) is this plus what only a server or the CLI uses, so the
 * browser client, which makes a PeerCore, does not carry that.
 */
export class PeerCore<S = unknown> implements TransportListener {
  readonly session: S;
  readonly logger: Logger;
  // Allocated on first use: most connections never need them, and a gateway holds thousands.
  #pendingTable: PendingCalls | undefined;
  protected dispatch: IncomingCalls<S> | undefined;
  /** The rate limit (PeerOptions.admit); a server's only. */
  protected readonly admit: { take(): boolean } | undefined;
  /** Made when `closed` is first read; one field, since most connections never read it. */
  #closedWaiter: { promise: Promise<CloseInfo>; resolve?: (info: CloseInfo) => void } | undefined;
  #outbox: Outbox | undefined;
  /** Protocol noise seen so far (see NOISE_WARN_LIMIT). */
  #noise = 0;
  protected closeInfo: CloseInfo | undefined;

  /**
   * `config` is shared by every peer made from the same options (one object for thousands);
   * only `session`, `logger` and `admit` are the peer's own.
   */
  constructor(
    protected readonly transport: Transport,
    options: { session: S; logger?: Logger | undefined; admit?: { take(): boolean } | undefined },
    /** Settings shared by every peer made from the same options. */
    protected readonly config: PeerConfig<S>,
  ) {
    this.session = options.session;
    this.logger = options.logger ?? silentLogger;
    this.admit = options.admit;
    // The peer is its transport's listener: no closures per connection.
    transport.listen(this);
  }

  get isClosed(): boolean {
    return this.closeInfo !== undefined;
  }

  /** Outgoing calls awaiting a response. */
  get pendingCount(): number {
    return this.#pendingTable?.size ?? 0;
  }

  /** Incoming calls being authorized or run: what a drain or a half-close waits for. */
  get inFlightCount(): number {
    return this.dispatch?.inFlightCount ?? 0;
  }

  /** How many more calls the table takes now (maxPendingCalls less those awaiting a response). */
  get callRoom(): number {
    return this.config.maxPendingCalls - this.pendingCount;
  }

  /**
   * Take a lone outgoing call out unsettled, for it to be answered another way (see
   * PendingCalls.withdraw); undefined when no call waits for `id`, or it went in a batch.
   */
  withdrawCall(id: RequestId): WithdrawnCall | undefined {
    return this.#pendingTable?.withdraw(id);
  }

  /** The method of the outgoing call waiting for `id`; undefined when none does. */
  pendingMethod(id: RequestId): string | undefined {
    return this.#pendingTable?.methodOf(id);
  }

  /** Tell `listener` after each outgoing call settles, until replaced (undefined: no one). */
  onCallSettled(listener: (() => void) | undefined): void {
    this.pending.onSettled = listener;
  }

  /** Outgoing calls awaiting a response; the table is made on the first call out. */
  private get pending(): PendingCalls {
    return (this.#pendingTable ??= new PendingCalls(
      this.config.maxPendingCalls,
      this.config.callTimeoutMs,
      (id) => this.sendCancel(id),
    ));
  }

  /** Incoming calls and notifications; made on the first one, or the first observer. */
  protected get incoming(): IncomingCalls<S> {
    return (this.dispatch ??= this.answering());
  }

  /** What answers the other side's calls; made once, on first use. */
  protected answering(): IncomingCalls<S> {
    return new IncomingCalls(this.session, this.logger, this.config, this.closeInfo);
  }

  /** The transport has begun to close: what is sent now is dropped (Transport.closeStarted). */
  get isClosing(): boolean {
    return this.transport.closeStarted === true;
  }

  /** TransportListener: the transport has closed. */
  transportClosed(code: number, reason: string): void {
    this.teardown(code, reason);
  }

  /** Settles once, when the connection has closed and every call has settled. */
  get closed(): Promise<CloseInfo> {
    if (!this.#closedWaiter) {
      if (this.closeInfo) this.#closedWaiter = { promise: Promise.resolve(this.closeInfo) };
      else {
        let resolve!: (info: CloseInfo) => void;
        const promise = new Promise<CloseInfo>((settle) => (resolve = settle));
        this.#closedWaiter = { promise, resolve };
      }
    }
    return this.#closedWaiter.promise;
  }

  /** Every incoming notification (reserved `rpc.` ones excluded). Completes on close. */
  get notifications$(): Observable<IncomingNotification> {
    return this.incoming.notificationHub().observable;
  }

  /** Call a method on the other side and await its result. */
  call<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R>,
    ...args: ParamsArgs<P, [options?: CallOptions]>
  ): Promise<R>;
  call(method: string, params?: Params, options?: CallOptions): Promise<unknown>;
  call(
    target: MethodDescriptor<Params | undefined, unknown> | string,
    params?: Params,
    options?: CallOptions,
  ): Promise<unknown> {
    const method = nameOf(target);
    if (this.closeInfo) return Promise.reject(this.lostCallError(this.closeInfo));
    const pending = this.pending;
    let promise: Promise<unknown>;
    try {
      promise = pending.add(method, options, params);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    const id = pending.lastId;
    let frame: string;
    try {
      frame = encodeRequest(id, method, params);
    } catch (err) {
      pending.fail(id, err);
      return promise;
    }
    this.sendOutgoing(frame, id);
    return promise;
  }

  /**
   * Send a notification. Throws ConnectionClosedError when the connection is closed, and the
   * transport's error, sending nothing, when its encoding cannot carry the notification.
   */
  notify<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P>,
    ...args: ParamsArgs<P>
  ): void;
  notify(method: string, params?: Params): void;
  notify(target: NotificationDescriptor<Params | undefined> | string, params?: Params): void {
    if (this.closeInfo) throw closedError(this.closeInfo);
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
    if (this.closeInfo) throw closedError(this.closeInfo);
    if (entries.length === 0) return [];
    const parts: string[] = [];
    const promises: Promise<unknown>[] = [];
    const opened: number[] = [];
    // The frame again, should the peer refuse it (PendingCalls.failRefused).
    const sent = batchWriter(parts, entries.length);
    try {
      for (const entry of entries) {
        if (entry.notification) {
          parts.push(encodeNotification(entry.method, entry.params));
          promises.push(Promise.resolve(undefined));
        } else {
          const pending = this.pending;
          promises.push(pending.add(entry.method, options, sent));
          opened.push(pending.lastId);
          parts.push(encodeRequest(pending.lastId, entry.method, entry.params));
        }
      }
    } catch (err) {
      for (const id of opened) this.pending.fail(id, err);
      await Promise.allSettled(promises);
      throw err;
    }
    this.transport.send(encodeBatch(parts));
    const results = await Promise.allSettled(promises);
    // Refused unread as a whole (PendingCalls.failRefused): its notifications were not delivered.
    const refusal = results.find(
      (r): r is PromiseRejectedResult =>
        r.status === 'rejected' && frameRefusals.has(r.reason as object),
    );
    if (!refusal) return results;
    return results.map((r, i) => (entries[i]!.notification ? refusal : r));
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
    const parsed = this.parse(text);
    const one = 'kind' in parsed ? parsed : parsed.batch ? undefined : parsed.messages[0]!;
    if (!one) return this.handleBatch((parsed as Frame).messages);
    const reply = this.handle(one);
    if (reply === undefined) return;
    if (isPromiseLike(reply)) {
      void reply
        .then((r) => r !== undefined && this.sendReply(r))
        .catch((err: unknown) => this.replyFailed(err));
    } else this.sendReply(reply);
  }

  /**
   * One frame's messages, classified: a lone message as itself (no frame around it), a batch as
   * its frame. Numeric ids to echo as sent are found by `config.idTexts`.
   */
  protected parse(text: string): Frame | Incoming {
    return parseIncomingWith(text, this.config.parse, this.config.idTexts);
  }

  protected handleBatch(messages: Incoming[]): void {
    const replies = messages.map((m) => this.handle(m));
    const sync: Reply[] = [];
    for (const reply of replies) {
      if (isPromiseLike(reply)) {
        // Members run concurrently; the one reply waits for the slowest.
        void Promise.all(replies.map((r) => Promise.resolve(r)))
          .then((settled) => this.sendBatchReply(settled, messages))
          .catch((err: unknown) => this.replyFailed(err));
        return;
      }
      sync.push(reply);
    }
    this.sendBatchReply(sync, messages);
  }

  protected sendBatchReply(replies: Reply[], messages: Incoming[]): void {
    const { parts, hooks } = batchReply(replies, messages);
    // Spec 6: nothing at all is returned for a batch of notifications only.
    if (parts.length === 0 || this.closeInfo) return;
    this.transport.send(encodeBatch(parts));
    for (const hook of hooks) this.runAfterSend(hook);
  }

  /**
   * A reply that could not be sent (the transport refused it): the connection cannot answer what
   * it was asked, so it closes (1011) rather than leave its calls unanswered, and the error is
   * logged; nothing is thrown into a promise no one awaits.
   */
  protected replyFailed(err: unknown): void {
    this.logger.error({ err }, 'a reply could not be sent: closing the connection');
    if (!this.closeInfo) this.close(1011, 'reply could not be sent');
  }

  protected sendReply(reply: string | HookedReply): void {
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

  /** Returns the reply text, a promise of it, or undefined when nothing is to be sent. */
  protected handle(message: Incoming): Reply | Promise<Reply> {
    switch (message.kind) {
      case 'request': {
        const reply = this.incoming.request(
          message.id,
          message.method,
          message.params,
          message.version,
          message.traceparent,
          message.tracestate,
        );
        // A numeric id the number would not write back as sent (rare): echo its text.
        return message.idText === undefined ? reply : echoIdText(reply, message.id, message.idText);
      }
      case 'notification':
        this.incoming.notification(message.method, message.params);
        return undefined;
      case 'success':
        this.admit?.take();
        if (!this.#pendingTable?.resolve(message.id, message.result)) this.logUnmatched(message.id);
        return undefined;
      case 'failure':
        this.admit?.take();
        if (!this.#pendingTable?.reject(message.id, message.error)) {
          // A frame refused (unread, or a batch past maxBatch): the calls it carried fail now
          // rather than at their timeout.
          if (message.id === null && this.#pendingTable?.failRefused(message.error)) return;
          this.logUnmatched(message.id, message.error);
        }
        return undefined;
      case 'invalid': {
        this.admit?.take();
        const reply = encodeFailure(message.id, message.error, message.version);
        return message.idText === undefined ? reply : withIdText(reply, message.id, message.idText);
      }
      case 'bad-response': {
        this.admit?.take();
        // One that names a pending call is that call's only answer: the call fails with it,
        // rather than wait for its timeout (or for ever).
        const failed =
          message.id !== undefined &&
          this.#pendingTable?.fail(
            message.id,
            new InternalError('Malformed response', { reason: message.reason }),
          );
        this.noisy(
          { id: message.id, reason: message.reason },
          failed ? 'a malformed response failed its call' : 'dropped a malformed response',
        );
        return undefined;
      }
    }
  }

  private sendCancel(id: number): void {
    if (!this.closeInfo) this.sendOutgoing(encodeNotification(ReservedMethod.Cancel, { id }));
  }

  /**
   * Requests (with their `id`) and notifications go through here, to be gathered into a batch
   * when asked.
   */
  private sendOutgoing(frame: string, id?: number): void {
    if (this.config.batchOutgoing <= 1) {
      this.transport.send(frame);
      return;
    }
    const outbox = (this.#outbox ??= { frames: [], ids: [] });
    if (id !== undefined) outbox.ids.push(id);
    if (outbox.frames.push(frame) === 1) queueMicrotask(() => this.flushOutbox());
    else if (outbox.frames.length >= this.config.batchOutgoing) this.flushOutbox();
  }

  private flushOutbox(): void {
    const outbox = this.#outbox;
    if (!outbox || outbox.frames.length === 0 || this.closeInfo) return;
    this.#outbox = undefined;
    const { frames, ids } = outbox;
    if (ids.length > 0 && frames.length > 1) {
      // Its calls went out as one batch: a refusal of it (PendingCalls.failRefused) names it.
      const sent = batchWriter(frames, frames.length);
      for (const id of ids) this.pending.regroup(id, sent);
    }
    try {
      this.transport.send(frames.length === 1 ? frames[0]! : encodeBatch(frames));
    } catch (err) {
      // A notification its encoding cannot carry, whose sender's call is over: its loss is
      // told by closing, as for one gathered into a batch.
      this.transport.close(1011, (err as Error).message);
    }
  }

  private logUnmatched(id: RequestId, error?: unknown): void {
    if (this.#pendingTable?.wasAbandoned(id)) {
      this.logger.debug({ id }, 'late response to a call given up locally');
    } else {
      this.noisy({ id, error }, 'dropped a response that matches no pending call');
    }
  }

  /** Log protocol noise, counted per connection, its values cut (see noise-log.ts). */
  private noisy(fields: Record<string, unknown>, msg: string): void {
    logNoise(this.logger, ++this.#noise, shownNoise(fields), msg);
  }

  /** What the calls out still pending when the connection closed reject with. */
  protected lostCallError(info: CloseInfo): Error {
    return closedError(info);
  }

  /** The one place a connection's state is released; runs once. */
  private teardown(code: number, reason: string): void {
    if (this.closeInfo) return;
    this.closeInfo = { code, reason };
    this.#pendingTable?.rejectAll(this.lostCallError(this.closeInfo));
    this.dispatch?.close(this.closeInfo);
    this.#closedWaiter?.resolve?.(this.closeInfo);
    // Only a server's peers are given onClosed, and they are Peers.
    this.config.onClosed?.(this as unknown as Peer<S>, this.closeInfo);
  }
}
