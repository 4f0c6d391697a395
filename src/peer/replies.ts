import { encodeFailure, encodeSuccess, withIdText } from '../protocol/encode.js';
import { ErrorCode, defaultErrorMessage } from '../protocol/error-codes.js';
import { isWireError, toWireError } from '../protocol/errors.js';
import type { ProtocolVersion, RequestId } from '../protocol/types.js';
import type { RunningCall } from './handler-context.js';
import type { Incoming } from '../protocol/classify.js';
import type { PieceSource } from '../transport/transport.js';

/*
 * What answering an incoming message produces, and the pure functions that encode it. Apart
 * so that the dispatch (incoming-dispatch.ts) and the frame handling (peer.ts) share one
 * notion of a reply without either owning the other's code.
 */

/** A reply, plus work to run once its text is on the wire (ctx.afterReply). */
export interface HookedReply {
  readonly text: string;
  readonly afterSend: () => void;
  /** Its text is made when first read (MadeLater): a transport may make it as it writes it. */
  readonly later?: true;
}

/**
 * An async handler's reply (or a batch member's past the turn's output), its text
 * (JSON.stringify's work, a few milliseconds a MiB) made when first read: by a transport that
 * makes it as it writes it (Transport.sendMade, sendPieces), at once if the turn's output allows,
 * else in its output turn, so that many such replies settling together are not all made in one
 * turn. The result is encoded as it is then: one the application changes after its handler
 * returned it may be sent changed.
 */
export class MadeLater implements HookedReply {
  readonly later = true;
  #make: (() => Reply) | undefined;
  #text = '';
  #afterSend: (() => void) | undefined;

  /** `make`, or -32603 for `id` should it throw (the encoders do not: a transport's turn must not). */
  constructor(
    make: () => Reply,
    private readonly id: RequestId,
    private readonly version: ProtocolVersion,
  ) {
    this.#make = make;
  }

  /** The reply's text; empty when there is none to send. */
  get text(): string {
    const make = this.#make;
    if (make !== undefined) {
      this.#make = undefined;
      let made: Reply;
      try {
        made = make();
      } catch {
        made = failure(this.id, ErrorCode.InternalError, this.version);
      }
      if (typeof made === 'string') this.#text = made;
      else if (made !== undefined) [this.#text, this.#afterSend] = [made.text, made.afterSend];
    }
    return this.#text;
  }

  /**
   * The reply's afterReply hook, known once its text is made: read after `text` (a reference to
   * the hook, not to this reply, so that a reply's text goes once it is written).
   */
  get afterSend(): () => void {
    return this.#afterSend ?? noHook;
  }
}

function noHook(): void {}
export type Reply = string | HookedReply | undefined;

export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

export function failure(
  id: RequestId,
  code: number,
  version: ProtocolVersion,
  data?: unknown,
): string {
  const message = defaultErrorMessage[code] ?? 'Server error';
  return encodeFailure(
    id,
    data === undefined ? { code, message } : { code, message, data },
    version,
  );
}

/**
 * `reply` with the id written as the peer sent it (`idText`, for a numeric id that String()
 * would write otherwise: see Incoming.idText). Only messages with such an id come here.
 */
export function echoIdText(
  reply: Reply | Promise<Reply>,
  id: RequestId,
  idText: string,
): Reply | Promise<Reply> {
  if (isPromiseLike(reply)) return reply.then((r) => echoIdText(r, id, idText) as Reply);
  if (reply === undefined) return undefined;
  if (typeof reply === 'string') return withIdText(reply, id, idText);
  return { text: withIdText(reply.text, id, idText), afterSend: reply.afterSend };
}

/** The reply to a call whose handler returned `result` (-32800 if it was cancelled meanwhile). */
export function successReply<S>(
  call: RunningCall<S>,
  result: unknown,
  version: ProtocolVersion,
): Reply {
  const id = call.id ?? null;
  if (call.aborted) return failure(id, ErrorCode.RequestCancelled, version);
  const text = encodeSuccess(id, result, version);
  return call.afterSend ? { text, afterSend: call.afterSend } : text;
}

/** The reply to a call whose handler threw `err`; anything but a wire error is logged. */
export function errorReply<S>(
  call: RunningCall<S>,
  err: unknown,
  version: ProtocolVersion,
  exposeErrorDetails: boolean,
): string {
  const id = call.id ?? null;
  if (call.aborted) return failure(id, ErrorCode.RequestCancelled, version);
  if (!isWireError(err)) {
    call.logger.error({ err, method: call.method }, 'handler failed');
  }
  return encodeFailure(id, toWireError(err, exposeErrorDetails), version);
}

/**
 * The most characters a batch's reply may hold. A batch multiplies what one call can answer by
 * up to maxBatch (a hundred history pages): past this, joined into one string, it would pass
 * V8's string limit and throw, or hold hundreds of MiB for one frame.
 */
export const MAX_BATCH_REPLY_CHARS = 64 * 1024 * 1024;

/**
 * The characters of a batch's members' replies made as their handlers return, before the rest are
 * made as the batch's reply is written (MadeLater): as many as the transports write in one turn
 * of the event loop (OUTPUT_CHARS_PER_TURN).
 */
export const BATCH_MADE_AT_ONCE_CHARS = 1024 * 1024;

/** The characters of a reply's text (0 for none). */
export function replyChars(reply: Reply): number {
  if (reply === undefined) return 0;
  return typeof reply === 'string' ? reply.length : reply.text.length;
}

/** What a batch's replies come to: the members' texts to join, and the hooks of those sent. */
export interface BatchReply {
  parts: string[];
  hooks: (() => void)[];
}

/**
 * The replies of a batch's members (`replies[i]` answers `messages[i]`), within
 * MAX_BATCH_REPLY_CHARS: a member whose reply would take the batch past it is answered -32603
 * (`data: { reason: 'batch reply too large', maxBatchReplyChars }`) under its own id instead,
 * its afterReply hook not run (its reply was not sent); the members before and after it that
 * fit are answered as they are.
 */
export function batchReply(
  replies: readonly Reply[],
  messages: readonly Incoming[],
  maxChars = MAX_BATCH_REPLY_CHARS,
): BatchReply {
  const parts: string[] = [];
  const hooks: (() => void)[] = [];
  // The brackets, and a comma between members.
  let chars = 1;
  for (let i = 0; i < replies.length; i++) {
    const reply = replies[i];
    if (reply === undefined) continue;
    const text = memberText(reply, messages[i]!, chars, maxChars, hooks);
    chars += text.length + 1;
    parts.push(text);
  }
  return { parts, hooks };
}

/**
 * batchReply's text in pieces, for a transport that writes one message over several turns
 * (Transport.sendPieces): `next` gives the opening bracket with the first member's reply, then
 * each further member's with its comma, the last with the closing bracket, then undefined. A
 * member's reply is made as its piece is asked for (a MadeLater reply's text is made then), so
 * a batch of large replies is made a turn's worth at a time. Same bound, same replacements as
 * batchReply; `hooks` are those of the members sent, complete once `next` has given undefined.
 * Undefined when no member has a reply (a batch of notifications only).
 */
export function batchPieces(
  replies: readonly Reply[],
  messages: readonly Incoming[],
  maxChars = MAX_BATCH_REPLY_CHARS,
): (PieceSource & { hooks: (() => void)[] }) | undefined {
  const answered: number[] = [];
  for (let i = 0; i < replies.length; i++) if (replies[i] !== undefined) answered.push(i);
  if (answered.length === 0) return undefined;
  // Each member's reply let go once its piece is made: a large batch's replies are not all held
  // until its last piece.
  const left: Reply[] = replies.slice();
  let chars = 1;
  let at = 0;
  const source = {
    hooks: [] as (() => void)[],
    made: 0,
    members: answered.length,
    next(): string | undefined {
      if (at >= answered.length) return undefined;
      const i = answered[at++]!;
      const reply = left[i]!;
      left[i] = undefined;
      // Made now (a MadeLater's text), and counted as made even if it is replaced.
      const madeChars = replyChars(reply);
      const text = memberText(reply, messages[i]!, chars, maxChars, source.hooks);
      chars += text.length + 1;
      source.made += Math.max(madeChars, text.length) + 1;
      const piece = at === 1 ? `[${text}` : `,${text}`;
      return at === answered.length ? `${piece}]` : piece;
    },
  };
  return source;
}

/**
 * A lone message's reply as a PieceSource of one piece, made when it is asked for (a MadeLater
 * reply's text is made then), for a transport that writes as the turn's output allows. Its piece
 * is empty when there is no reply to send; `hooks` hold the reply's afterReply hook once made.
 */
export function replyPieces(reply: string | HookedReply): PieceSource & { hooks: (() => void)[] } {
  let given = false;
  const source = {
    hooks: [] as (() => void)[],
    made: 0,
    next(): string | undefined {
      if (given) return undefined;
      given = true;
      const text = typeof reply === 'string' ? reply : reply.text;
      if (typeof reply !== 'string') source.hooks.push(reply.afterSend);
      source.made = text.length;
      return text;
    },
  };
  return source;
}

/**
 * One member's reply in a batch whose reply holds `chars` characters so far: its own (its hook
 * added to `hooks`), or -32603 under its id when it would take the batch past `maxChars`.
 */
function memberText(
  reply: string | HookedReply,
  message: Incoming,
  chars: number,
  maxChars: number,
  hooks: (() => void)[],
): string {
  const text = typeof reply === 'string' ? reply : reply.text;
  if (chars + text.length + 1 <= maxChars) {
    if (typeof reply !== 'string') hooks.push(reply.afterSend);
    return text;
  }
  // Only a request (or an invalid one, answered under its id) has a reply to replace.
  const { id, idText, version } = message as Extract<Incoming, { kind: 'request' | 'invalid' }>;
  const failed = encodeFailure(
    id,
    {
      code: ErrorCode.InternalError,
      message: 'Reply too large',
      data: { reason: 'batch reply too large', maxBatchReplyChars: maxChars },
    },
    version,
  );
  return idText === undefined ? failed : withIdText(failed, id, idText);
}
