import { isRequestId } from '../protocol/classify.js';
import { isErrorObject } from '../protocol/errors.js';

/*
 * What a JSON-RPC 2.0 server may send, checked by the CLI before its Peer sees it. The Peer turns
 * a malformed response into a local -32603 "Malformed response" error, which the CLI cannot tell
 * from one the server sent, and answers a message with an id but neither `result` nor `error`
 * as an Invalid Request, the call left waiting for its timeout. Looked at first, either ends the
 * command as an HTTP body that is not a response does: exit 3, the message quoted.
 */

/** The JSON value of `text`, or NOT_JSON. */
export function parsedOrNot(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return NOT_JSON;
  }
}

/** What parsedOrNot gives for text that is not JSON (no JSON value is this object). */
export const NOT_JSON: unique symbol = Symbol('not JSON');

/**
 * Why a frame (parsed: parsedOrNot) is neither a JSON-RPC 2.0 response nor a call or
 * notification of the server's own, nor a batch of those; undefined when it is one.
 */
export function malformedFrame(value: unknown): string | undefined {
  if (value === NOT_JSON) return 'not JSON';
  if (!Array.isArray(value)) return malformedMessage(value);
  if (value.length === 0) return 'an empty batch';
  for (const message of value) {
    const why = malformedMessage(message);
    if (why !== undefined) return `in a batch: ${why}`;
  }
  return undefined;
}

/** Why an HTTP body (parsed: parsedOrNot) is not the answer to one call; undefined when it is. */
export function malformedAnswer(value: unknown): string | undefined {
  if (Array.isArray(value)) return 'a batch, not one response';
  if (typeof value === 'object' && value !== null && 'method' in value) {
    return 'a call or notification, not a response';
  }
  return malformedFrame(value);
}

function malformedMessage(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'not a JSON object';
  }
  const message = value as Record<string, unknown>;
  // The server's own call or notification: the Peer answers or handles it.
  if ('method' in message) return undefined;
  if (message['jsonrpc'] !== '2.0') return 'no "jsonrpc": "2.0"';
  if (!isRequestId(message['id'])) return 'no valid "id"';
  const hasResult = 'result' in message;
  const hasError = 'error' in message;
  if (hasResult && hasError) return 'both "result" and "error"';
  if (!hasResult && !hasError) return 'neither "result" nor "error"';
  if (hasError && !isErrorObject(message['error'])) return 'an "error" that is not an error object';
  return undefined;
}
