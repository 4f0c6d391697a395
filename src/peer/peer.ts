import type { Observable } from 'rxjs';
import { parseIncomingWith } from '../protocol/classify.js';
import { idTextsOf } from '../protocol/id-text.js';
import { keepParamsTexts } from '../protocol/params-text.js';
import { keepsParamsTexts } from './method-registry.js';
import type { Frame, Incoming } from '../protocol/classify.js';
import type { Params } from '../protocol/types.js';
import type { Transport } from '../transport/transport.js';
import type { IncomingCalls } from './incoming-calls.js';
import { batchPieces } from './replies.js';
import type { HookedReply, Reply } from './replies.js';
import { IncomingDispatch } from './incoming-dispatch.js';
import type { NotificationDescriptor } from './method-descriptor.js';
import type { HandlerTable } from './method-registry.js';
import { notificationsNamed } from './notifications.js';
import { peerConfig } from './peer-options.js';
import type { PeerConfig, PeerOptions } from './peer-options.js';
import { PeerCore } from './peer-core.js';

// Moved out of this file; re-exported so `peer/peer.js` stays the one place to import them from.
export { peerConfig } from './peer-options.js';
export type { CallOutcome, CloseInfo, PeerConfig, PeerOptions } from './peer-options.js';
export type { IncomingNotification } from './notifications.js';
export { NOISE_WARN_LIMIT } from './noise-log.js';
export type { HookedReply, Reply } from './replies.js';
export { PeerCore } from './peer-core.js';
export type { BatchEntry } from './peer-core.js';

/**
 * One end of a JSON-RPC connection as a server (or the CLI) makes it: a PeerCore
 * (peer-core.ts: frames, outgoing calls, handlers) that also answers to what only a server
 * asks of its calls (draining, the rate limit `admit`, the identity gate, `authorize`: see
 * IncomingDispatch), resolves its config from the options when given none, and shows its
 * in-flight count, buffered bytes and notifications by method.
 */
export class Peer<S = unknown> extends PeerCore<S> {
  // No fields of its own: the core's constructor may already hand it messages (a transport
  // delivers those it holds when listened to), and fields would be set only after that.

  /**
   * `config` is what `peerConfig(options)` returns; a server making a peer per connection
   * resolves it once and passes it to each, so only `session`, `logger` and `admit` are read
   * from `options` per peer.
   */
  constructor(
    transport: Transport,
    options: PeerOptions<S>,
    config: PeerConfig<S> = peerConfig(options),
  ) {
    super(transport, options, config);
  }

  /** Handlers for incoming calls. */
  get registry(): HandlerTable<S> {
    return this.config.registry;
  }

  get bufferedAmount(): number {
    return this.transport.bufferedAmount;
  }

  /** Notifications of one method, as their params. */
  notificationsOf<P extends Params | undefined>(
    descriptor: NotificationDescriptor<P> | string,
  ): Observable<P> {
    return notificationsNamed(this.notifications$, descriptor);
  }

  /**
   * From now on answer incoming requests with -32006 Shutting down (used while
   * draining: the calls already running finish, new ones are refused).
   */
  stopAcceptingCalls(): void {
    (this.incoming as IncomingDispatch<S>).stopAcceptingCalls();
  }

  /**
   * `done` once the runs this connection's close left going (handlers that have not heeded
   * their signal yet, authorize hooks deciding) have settled; at once when there are none.
   */
  afterRuns(done: () => void): void {
    const dispatch = this.dispatch as IncomingDispatch<S> | undefined;
    if (dispatch) dispatch.afterRuns(done);
    else done();
  }

  /**
   * `done` once no call, notification handler or authorize hook is running, or the connection has
   * closed (IncomingDispatch.whenIdle).
   */
  whenIdle(done: () => void): void {
    const dispatch = this.dispatch as IncomingDispatch<S> | undefined;
    if (dispatch) dispatch.whenIdle(done);
    else done();
  }

  /**
   * Hold what this connection's close releases (afterRuns) while `run` goes on, for `maxMs` at
   * most: a run started for the connection that nothing waits for any more (an identity hook
   * given up on).
   */
  holdWhile(run: PromiseLike<unknown>, maxMs: number): void {
    (this.incoming as IncomingDispatch<S>).holdWhile(run, maxMs);
  }

  /**
   * Every id echoed as sent, found the fastest way (idTextsOf). A batch's members after the
   * first cost the transport's input budget too (Transport.chargeMessages): it counted the
   * frame as one message. Params holding a number JSON.stringify would write otherwise keep
   * their text (params-text.ts), for a gateway to pass them on as sent.
   */
  protected override parse(text: string): Frame | Incoming {
    const parsed = parseIncomingWith(text, this.config.parse, idTextsOf);
    if (keepsParamsTexts(this.config.registry)) keepParamsTexts(text, parsed);
    if (!('kind' in parsed) && parsed.messages.length > 1) {
      this.transport.chargeMessages?.(parsed.messages.length - 1);
    }
    return parsed;
  }

  protected override answering(): IncomingCalls<S> {
    const incoming = new IncomingDispatch(
      this.session,
      this.logger,
      this.config,
      this.admit,
      this.closeInfo,
    );
    incoming.output = this.transport;
    return incoming;
  }

  /** Past the turn's output, a batch's members' replies are made as they are written (sendBatchReply). */
  protected override handleBatch(messages: Incoming[]): void {
    this.asBatch(() => super.handleBatch(messages));
  }

  /**
   * @internal Run `handle` (a batch's members handled) with the batch's plain members' replies made as
   * their handlers return until they reach BATCH_MADE_AT_ONCE_CHARS or the turn's output is
   * spent, and made as they are written past that (IncomingDispatch.batchMade).
   */
  protected asBatch<T>(handle: () => T): T {
    const incoming = this.incoming as IncomingDispatch<S>;
    incoming.batchMade = 0;
    try {
      return handle();
    } finally {
      incoming.batchMade = undefined;
    }
  }

  /**
   * A batch's reply goes in pieces (Transport.sendPieces), each member's reply made as its piece
   * is written: a batch of large replies is made and written a turn's worth at a time, the
   * message in fragments.
   */
  protected override sendBatchReply(replies: Reply[], messages: Incoming[]): void {
    if (!this.transport.sendPieces || this.closeInfo)
      return super.sendBatchReply(replies, messages);
    const pieces = batchPieces(replies, messages);
    if (pieces === undefined) return; // spec 6: nothing for a batch of notifications only
    this.transport.sendPieces(pieces, () => {
      for (const hook of pieces.hooks) this.runAfterSend(hook);
    });
  }

  /**
   * An async handler's reply (MadeLater) is made as the transport writes it (Transport.sendMade):
   * in the turn its output allows, not all in the turn the handlers settled in.
   */
  protected override sendReply(reply: string | HookedReply): void {
    if (typeof reply === 'string' || !reply.later || !this.transport.sendMade || this.closeInfo) {
      return super.sendReply(reply);
    }
    this.transport.sendMade(
      () => reply.text || undefined, // made now; empty: none to send
      () => this.runAfterSend(reply.afterSend),
    );
  }
}
