import { MAX_ENCODED_DEPTH } from '../encoding/encoded-depth.js';
import { holdsLoneSurrogate, mayHoldLoneSurrogate } from '../encoding/lone-surrogates.js';
import { jsonHoldsOverflowingNumber } from '../encoding/non-finite.js';
import { JsonRefusal, parseJson } from '../protocol/safe-json.js';

/** A line break: JSON allows one only as whitespace, and it would end a line of the framing. */
const LINE_BREAK = /[\r\n]/;

/**
 * Whether a message's payload, as read from the broker, can go into a frame: one JSON value, at
 * most MAX_ENCODED_DEPTH deep, with no line break, no string holding a lone surrogate (which
 * MessagePack and CBOR cannot carry) and no number beyond a double's range (`1e400`, which they
 * could carry only as Infinity, a number no JSON text holds and their clients refuse), as every
 * publish through a gateway writes it (JSON.stringify, held to assertEncodable). The broker is
 * written by other nodes and by whatever else reaches it, and a payload is pasted into frames
 * unparsed (frames.ts messageTail): one that is not JSON would make a frame that is not either,
 * and a line break would split an NDJSON line or an SSE event.
 * Checked once per message per node, not per subscriber.
 */
export function isSendablePayload(payload: string): boolean {
  if (LINE_BREAK.test(payload)) return false;
  const value = parseJson(payload, MAX_ENCODED_DEPTH);
  // The value parsed once, for its strings and its numbers too, each walked only when the text
  // may hold what is looked for (a surrogate escape; a long run of digits or a large exponent).
  return (
    !(value instanceof JsonRefusal) &&
    !(mayHoldLoneSurrogate(payload) && holdsLoneSurrogate(value)) &&
    !jsonHoldsOverflowingNumber(payload, value)
  );
}

/**
 * isSendablePayload for a payload `broker` delivered: always true for a broker whose payloads
 * are trusted (Broker.trustedPayloads, the memory broker), which are not checked again.
 */
export function isSendableFrom(
  broker: { readonly trustedPayloads?: boolean },
  payload: string,
): boolean {
  return broker.trustedPayloads === true || isSendablePayload(payload);
}
