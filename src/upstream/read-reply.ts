import { JsonRpcError } from '../protocol/errors.js';
import { strictUtf8 } from '../protocol/invalid-utf8.js';
import { memberValueSpans } from '../protocol/json-members.js';
import { mayNotRoundTrip } from '../protocol/params-text.js';
import { JsonRefusal, parseJson } from '../protocol/safe-json.js';
import { mayHoldStrippedKeys, withoutStrippedMembers } from '../encoding/proto-keys.js';
import { jsonHoldsOverflowingNumber } from '../encoding/non-finite.js';
import { isRecord } from '../peer/option-rules.js';
import { defaultLimits } from '../server/options.js';
import { UpstreamError } from './upstream-error.js';

/**
 * What an upstream's reply may hold as JSON, besides its bytes: the bounds a client's message is
 * held to (the gateway's `limits`), each counted on the reply's text as a client's message's are,
 * its envelope included, before it is parsed. A reply of a million tiny values is refused after
 * a scan, never parsed; one the gateway would refuse from a client is never passed on to one.
 */
export interface ReplyLimits {
  /** Deepest nesting, the reply's own object level 1 (`limits.maxDepth`). */
  readonly maxDepth: number;
  /** Most JSON values (`limits.maxJsonValues`): each object, array, string, number, literal. */
  readonly maxJsonValues: number;
}

/** For an endpoint given no limits (a hook's): the gateway's defaults. */
export const DEFAULT_REPLY_LIMITS: ReplyLimits = {
  maxDepth: defaultLimits.maxDepth,
  maxJsonValues: defaultLimits.maxJsonValues,
};

/**
 * The result of an upstream's JSON-RPC reply (its body's bytes) to request `id`, or its error
 * unchanged as a JsonRpcError; anything that is not that response is -32011. `status` is the
 * HTTP status when it was not 2xx: an error response still passes through, anything else names
 * the status. Bytes that are not UTF-8 are no JSON text (RFC 8259, section 8.1): -32011 too,
 * never a result with U+FFFD where the upstream's bytes were. A reply past `limits` is -32011
 * naming the bound it passed (`data: { upstream, reason, bound, limit }`), whatever its status.
 * It throws nothing else: a JsonRpcError it throws goes to the client as it is.
 *
 * Parsing reads every number as a double, so the result written back for the client could say
 * something else than the upstream did (12345678901234567890 as 12345678901234567000, 1e400 as
 * null): when the reply may hold such a number, `onResultText` is given the result's text as
 * the upstream wrote it, for the reply to carry that text instead (see keepResultText). That
 * text is without the members the parse strips (`__proto__`, a `constructor` holding a
 * `prototype`), as the parsed result is: it reads as that result, and carries no more than it.
 * Such a result holding a number beyond a double's range (1e400) is -32011 instead: MessagePack
 * and CBOR could carry it only as Infinity, which no JSON text holds and their clients refuse,
 * and the gateway passes on what every encoding carries alike.
 */
export function readReply(
  body: Uint8Array,
  id: number,
  upstream: string,
  status?: number,
  onResultText?: (text: string) => void,
  limits: ReplyLimits = DEFAULT_REPLY_LIMITS,
): unknown {
  const notResponse = (reason: string) =>
    new UpstreamError('unavailable', upstream, status === undefined ? reason : `status ${status}`);
  const text = strictUtf8(body);
  if (text === undefined) throw notResponse('invalid UTF-8 in the reply');
  const reply = parseJson(text, limits.maxDepth, limits.maxJsonValues);
  if (reply instanceof JsonRefusal) {
    if (reply.reason === 'syntax') throw notResponse('invalid JSON in the reply');
    throw overLimit(reply, upstream, limits);
  }
  if (!isRecord(reply) || reply['jsonrpc'] !== '2.0') throw notResponse('not a JSON-RPC response');
  if (reply['id'] !== id) throw notResponse('a reply to another id');
  const error = reply['error'];
  // The specification: "Either the result member or error member MUST be included, but both
  // members MUST NOT be included." One with both answers nothing, as the client's peer holds.
  if (error !== undefined && 'result' in reply) throw notResponse('both "result" and "error"');
  if (error !== undefined) {
    // A safe integer, as the gateway's reply to its client must carry it (isWireError): an
    // integer past 2^53 (1e300) is not one JSON-RPC can pass on exactly, so it is the upstream's
    // malformed answer (-32011, logged as the upstream's failures are), not an internal error.
    if (
      !isRecord(error) ||
      !Number.isSafeInteger(error['code']) ||
      typeof error['message'] !== 'string'
    ) {
      throw notResponse('a malformed error object');
    }
    throw new JsonRpcError(error['code'] as number, error['message'], error['data']);
  }
  if (status !== undefined) throw notResponse('');
  if (!('result' in reply)) throw notResponse('a response with neither result nor error');
  if (onResultText && mayNotRoundTrip(text)) {
    if (jsonHoldsOverflowingNumber(text, reply['result'])) {
      throw notResponse("a number beyond a double's range in the result");
    }
    const span = memberValueSpans(text, false, 'result')[0];
    if (span) {
      const written = text.slice(span[0], span[1]);
      onResultText(mayHoldStrippedKeys(written) ? withoutStrippedMembers(written) : written);
    }
  }
  return reply['result'];
}

/** -32011 for a reply past `limits`: the bound it passed (the option's name) and its value. */
function overLimit(refusal: JsonRefusal, upstream: string, limits: ReplyLimits): UpstreamError {
  const [reason, bound, limit] =
    refusal.reason === 'depth'
      ? ['reply nests too deep', 'maxDepth', limits.maxDepth]
      : ['reply holds too many JSON values', 'maxJsonValues', limits.maxJsonValues];
  return new UpstreamError('unavailable', upstream, reason, refusal.message, false, {
    bound,
    limit,
  });
}
