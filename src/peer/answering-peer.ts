import { parseFrame } from '../protocol/classify.js';
import { encodeBatch } from '../protocol/encode.js';
import { keepParamsTexts } from '../protocol/params-text.js';
import { keepsParamsTexts } from './method-registry.js';
import { Peer } from './peer.js';
import { MAX_BATCH_REPLY_CHARS, batchReply } from './replies.js';

/**
 * A peer for hosts where each request carries its own response (HTTP POST): `answer` returns
 * the reply instead of sending it. A subclass so that the browser client, which never answers
 * this way, does not carry it.
 */
export class AnsweringPeer<S = unknown> extends Peer<S> {
  /**
   * Answer one frame: resolves with the reply text, or undefined when none is due (a
   * notification, a batch of notifications only). `afterReply` hooks run once the reply is known.
   * `traceparent` (the HTTP request's header) goes to each request that carries none of its own,
   * and `tracestate` (the header, as sent: checked as a request's member is) with it; a request
   * with a traceparent of its own keeps its own tracestate, or none.
   */
  async answer(
    text: string,
    traceparent?: string,
    tracestate?: unknown,
  ): Promise<string | undefined> {
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
    const replies = await Promise.all(frame.messages.map((m) => Promise.resolve(this.handle(m))));
    // A lone message's reply is its own; a batch's is bounded as a whole.
    const { parts, hooks } = batchReply(
      replies,
      frame.messages,
      frame.batch ? MAX_BATCH_REPLY_CHARS : Infinity,
    );
    for (const hook of hooks) this.runAfterSend(hook);
    if (parts.length === 0) return undefined;
    return frame.batch ? encodeBatch(parts) : parts[0];
  }
}
