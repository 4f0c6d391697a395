import { parseFrame } from '../protocol/classify.js';
import { keepParamsTexts } from '../protocol/params-text.js';
import { keepsParamsTexts } from './method-registry.js';
import { Peer } from './peer.js';
import type { PieceSource } from '../transport/transport.js';
import { MAX_BATCH_REPLY_CHARS, batchPieces, replyPieces } from './replies.js';

/**
 * A reply to one HTTP exchange, made piece by piece as it is written (input-turns.ts'
 * takePieces): a lone message's reply is one piece, a batch's one per member. `written` runs
 * the replies' afterReply hooks: call it once the last piece is written.
 */
export interface AnsweredReply extends PieceSource {
  written(): void;
}

/**
 * A peer for hosts where each request carries its own response (HTTP POST): `answer` returns
 * the reply instead of sending it. A subclass so that the browser client, which never answers
 * this way, does not carry it.
 */
export class AnsweringPeer<S = unknown> extends Peer<S> {
  /**
   * Answer one frame: resolves with its reply, to be made as it is written (a handler's result
   * is encoded when its piece is taken, so that many replies settling together are not all
   * made in one turn), or undefined when none is due (a notification, a batch of notifications
   * only). `traceparent` (the HTTP request's header) goes to each request that carries none of
   * its own, and `tracestate` (the header, as sent: checked as a request's member is) with it; a
   * request with a traceparent of its own keeps its own tracestate, or none.
   */
  async answer(
    text: string,
    traceparent?: string,
    tracestate?: unknown,
  ): Promise<AnsweredReply | undefined> {
    if (this.closeInfo) return undefined;
    const frame = parseFrame(text, this.config.parse);
    if (keepsParamsTexts(this.config.registry)) keepParamsTexts(text, frame);
    // As Peer.parse: a batch's members after the first cost the transport's budget too.
    if (frame.messages.length > 1) this.transport.chargeMessages?.(frame.messages.length - 1);
    if (traceparent !== undefined) {
      for (const message of frame.messages) {
        if (message.kind === 'request' && message.traceparent === undefined) {
          message.traceparent = traceparent;
          message.tracestate = tracestate;
        }
      }
    }
    const handleAll = () => frame.messages.map((m) => Promise.resolve(this.handle(m)));
    // A batch's members as on a connection (Peer.handleBatch).
    const replies = await Promise.all(frame.batch ? this.asBatch(handleAll) : handleAll());
    if (!frame.batch) {
      const reply = replies[0];
      return reply === undefined ? undefined : this.answered(replyPieces(reply));
    }
    // A batch's reply is bounded as a whole; none for a batch of notifications only (spec 6).
    const pieces = batchPieces(replies, frame.messages, MAX_BATCH_REPLY_CHARS);
    return pieces && this.answered(pieces);
  }

  /**
   * `answer`'s reply made whole at once, for hosts that need its text (a broker's consumer) or
   * whose callers are trusted services (the server API); its afterReply hooks run.
   */
  async answerText(text: string): Promise<string | undefined> {
    const reply = await this.answer(text);
    if (reply === undefined) return undefined;
    let whole = '';
    for (let piece = reply.next(); piece !== undefined; piece = reply.next()) whole += piece;
    reply.written();
    return whole === '' ? undefined : whole;
  }

  /** `pieces` with `written`, which runs the hooks of the replies they gave. */
  private answered(pieces: PieceSource & { hooks: (() => void)[] }): AnsweredReply {
    return Object.assign(pieces, {
      written: () => {
        for (const hook of pieces.hooks) this.runAfterSend(hook);
      },
    });
  }
}
