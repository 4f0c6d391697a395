import { exceedsDepth } from '../protocol/safe-json.js';
import { jsonHoldsLoneSurrogate } from './lone-surrogates.js';

/**
 * How deep a value the gateway sends may nest. msgpackr and cbor-x encode and decode by
 * recursion: on Node 20's default stack they overflow past about 1 300 levels of maps (less on
 * a smaller stack, or from a deep call stack), and an overflow inside a send would escape as an
 * uncaught RangeError. Everything that enters the gateway is held to this bound — published data,
 * and each incoming message through limits.maxDepth, which may not be set above it — so what
 * goes out, in any encoding, nests at most this deep plus its envelope.
 */
export const MAX_ENCODED_DEPTH = 512;

/**
 * The deepest message a codec is asked to encode: a value at MAX_ENCODED_DEPTH inside its
 * envelope (a batch, a message, a subscription notification's params). Deeper is refused
 * before the encoder runs (codec.ts encodeOutgoing).
 */
export const MAX_MESSAGE_DEPTH = MAX_ENCODED_DEPTH + 3;

/**
 * Throws, naming `what`, when the JSON text of a value about to enter the gateway (published
 * data, notification params, a stream's value) is one a MessagePack or CBOR connection could not
 * be sent: a RangeError when it nests deeper than MAX_ENCODED_DEPTH, a TypeError when a string
 * of it (a value or a key) holds a lone surrogate, which UTF-8 has no form for. Refused where it
 * enters, for every encoding, before any subscriber's encoding could fail on it. The strings are
 * looked at only when the text may hold one (lone-surrogates.ts mayHoldLoneSurrogate).
 */
export function assertEncodable(json: string, what: string): void {
  if (exceedsDepth(json, MAX_ENCODED_DEPTH)) {
    throw new RangeError(
      `${what} nests deeper than ${MAX_ENCODED_DEPTH} levels, the most a value the gateway sends may`,
    );
  }
  if (jsonHoldsLoneSurrogate(json)) {
    throw new TypeError(
      `${what} holds a string that is not well-formed Unicode (a lone surrogate), which MessagePack and CBOR cannot carry`,
    );
  }
}
