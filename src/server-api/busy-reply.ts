import { parseFrame } from '../protocol/classify.js';
import type { ClassifyOptions } from '../protocol/classify.js';
import { encodeBatch, encodeFailure, withIdText } from '../protocol/encode.js';
import { ErrorCode, defaultErrorMessage } from '../protocol/error-codes.js';
import type { ErrorObject } from '../protocol/types.js';

const BUSY: ErrorObject = Object.freeze({
  code: ErrorCode.ServerBusy,
  message: defaultErrorMessage[ErrorCode.ServerBusy]!,
});

/**
 * The answer to a request text the server API's consumer refuses for want of room: `-32000
 * Server busy` under each request's id (a batch's as a batch; an invalid member gets its own
 * error, as it would have anyway), or under id null when the text holds no request (only
 * notifications: the requester waiting on the reply subject still learns it was not handled).
 */
export function busyReply(text: string, parse: ClassifyOptions): string {
  return failureReply(text, parse, BUSY);
}

/**
 * `error` under each request's id of `text`, as busyReply answers: what a consumed request gets
 * when its reply cannot be sent as it is (its handling done or refused).
 */
export function failureReply(text: string, parse: ClassifyOptions, error: ErrorObject): string {
  const frame = parseFrame(text, parse);
  const parts: string[] = [];
  for (const message of frame.messages) {
    if (message.kind !== 'request' && message.kind !== 'invalid') continue;
    const reply = encodeFailure(
      message.id,
      message.kind === 'request' ? error : message.error,
      message.version,
    );
    parts.push(message.idText ? withIdText(reply, message.id, message.idText) : reply);
  }
  if (parts.length === 0) return encodeFailure(null, error);
  return frame.batch ? encodeBatch(parts) : parts[0]!;
}
