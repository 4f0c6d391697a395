import { exceedsDepth } from '../protocol/safe-json.js';

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
 * Throws a RangeError naming `what` when the JSON text of a value about to enter the gateway
 * (published data) nests deeper than MAX_ENCODED_DEPTH: refused where it enters, before any
 * subscriber's encoding could fail on it.
 */
export function assertEncodableDepth(json: string, what: string): void {
  if (exceedsDepth(json, MAX_ENCODED_DEPTH)) {
    throw new RangeError(
      `${what} nests deeper than ${MAX_ENCODED_DEPTH} levels, the most a value the gateway sends may`,
    );
  }
}
