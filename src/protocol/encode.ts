import { ErrorCode } from './error-codes.js';
import type { ErrorObject, Params, ProtocolVersion, RequestId } from './types.js';

/**
 * Encoders build the text of each frame directly, so a reply costs one
 * JSON.stringify of its payload and nothing else. They never throw: a result
 * that cannot be serialized (BigInt, cycles) becomes an Internal error reply.
 */

function stringifyOrNull(value: unknown): string | undefined {
  try {
    // `undefined` (a handler that returned nothing) is sent as null: `result` is REQUIRED.
    return JSON.stringify(value === undefined ? null : value) ?? 'null';
  } catch {
    return undefined;
  }
}

export function encodeId(id: RequestId): string {
  return typeof id === 'string' ? JSON.stringify(id) : String(id);
}

/**
 * `reply` (made by encodeSuccess or encodeFailure, which write the id last) with its id written
 * as `idText`: the text the peer sent for a numeric id that String(id) would write otherwise
 * (see id-text.ts). Only such rare ids pay for it; a reply of another shape is left as it is.
 */
export function withIdText(reply: string, id: RequestId, idText: string): string {
  const tail = `"id":${encodeId(id)}}`;
  if (!reply.endsWith(tail)) return reply;
  return `${reply.slice(0, reply.length - tail.length)}"id":${idText}}`;
}

export function encodeSuccess(
  id: RequestId,
  result: unknown,
  version: ProtocolVersion = '2.0',
): string {
  const text = stringifyOrNull(result);
  if (text === undefined) {
    return encodeFailure(
      id,
      {
        code: ErrorCode.InternalError,
        message: 'Internal error',
        data: 'result is not serializable as JSON',
      },
      version,
    );
  }
  if (version === '1.0') return `{"result":${text},"error":null,"id":${encodeId(id)}}`;
  return `{"jsonrpc":"2.0","result":${text},"id":${encodeId(id)}}`;
}

/**
 * encodeSuccess's reply with `json` as its result, written as it is: for a result serialised
 * once and answered again and again unchanged (the OpenRPC document of `rpc.discover`), where
 * encodeSuccess would serialise it on every call. `json` must be the text of one JSON value
 * (JSON.stringify's, never a peer's). The frame is encodeSuccess's own, around a null result:
 * one place writes the shape of a success.
 */
export function encodeSuccessText(
  id: RequestId,
  json: string,
  version: ProtocolVersion = '2.0',
): string {
  // The first `"result":null` is the result member: it comes before the id and the error.
  return encodeSuccess(id, null, version).replace('"result":null', () => `"result":${json}`);
}

export function encodeFailure(
  id: RequestId,
  error: ErrorObject,
  version: ProtocolVersion = '2.0',
): string {
  let text: string;
  try {
    text = JSON.stringify(error);
  } catch {
    text = JSON.stringify({ code: error.code, message: String(error.message) });
  }
  if (version === '1.0') return `{"result":null,"error":${text},"id":${encodeId(id)}}`;
  return `{"jsonrpc":"2.0","error":${text},"id":${encodeId(id)}}`;
}

/** The method last written, and its frame's opening: calls in a row are mostly to one method. */
let lastMethod: unknown = NaN; // equal to no method name, not even itself
let lastOpening = '';

/**
 * `{"jsonrpc":"2.0","method":<method>` and the params member when there are params. Throws a
 * TypeError for a method that is not a string (from JavaScript, or a shared worker's tab), which
 * JSON.stringify would write as nothing and leave the frame invalid JSON.
 */
function callOpening(method: string, params: Params | undefined): string {
  // JSON-RPC 2.0 §4.2: by-position (an array) or by-name (an object); a lone string or number is
  // the caller's mistake, refused here rather than sent for the peer to answer -32600.
  if (params !== undefined && (typeof params !== 'object' || params === null)) {
    throw new TypeError(
      `params must be an array or an object (JSON-RPC 2.0 §4.2), not ${params === null ? 'null' : typeof params}: send [value] to pass it by position`,
    );
  }
  if (method !== lastMethod) {
    // Only a method other than the last one is looked at: the last one was a string.
    if (typeof method !== 'string') {
      throw new TypeError(`method must be a string, not ${typeof method}`);
    }
    lastOpening = `{"jsonrpc":"2.0","method":${JSON.stringify(method)}`;
    lastMethod = method;
  }
  return params === undefined ? lastOpening : `${lastOpening},"params":${JSON.stringify(params)}`;
}

/**
 * Throws a TypeError when the method is not a string or params cannot be serialized: that is
 * the caller's own bug.
 */
export function encodeRequest(id: RequestId, method: string, params?: Params): string {
  return `${callOpening(method, params)},"id":${encodeId(id)}}`;
}

export function encodeNotification(method: string, params?: Params): string {
  return `${callOpening(method, params)}}`;
}

export function encodeBatch(parts: readonly string[]): string {
  return `[${parts.join(',')}]`;
}
