/*
 * Strings that are not well-formed UTF-16 (a lone surrogate: JSON text can spell one, "\ud800").
 * MessagePack and CBOR strings are UTF-8, which has no form for a lone surrogate: msgpackr writes
 * U+FFFD in its place, cbor-x ill-formed bytes no decoder reads as sent. A message holding one is
 * refused by the binary codecs (codec.ts encodeOutgoing), and a value holding one where it enters
 * the gateway for every encoding (encoded-depth.ts assertEncodable).
 */

type WellFormedCheck = (text: string) => boolean;

/** A lone surrogate, as a Unicode-mode regular expression reads one (a pair is one point). */
const LONE_SURROGATE = /\p{Cs}/u;

/** The fallback of isWellFormedString where String.prototype.isWellFormed (ES2024) is absent. */
export function isWellFormedByPattern(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/** A string as ES2024 types it. */
type Es2024String = string & { isWellFormed(): boolean };

/**
 * Whether `text` holds no lone surrogate. Node 20 and current browsers have isWellFormed; the
 * client bundle targets ES2022, so an older browser uses the pattern.
 */
export const isWellFormedString: WellFormedCheck =
  typeof (String.prototype as Partial<Es2024String>).isWellFormed === 'function'
    ? (text) => (text as Es2024String).isWellFormed()
    : isWellFormedByPattern;

/**
 * A `\u` escape of a surrogate in JSON text. It may be half of an escaped pair, or the tail of an
 * escaped backslash: only a hint, which the parsed value settles.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Whether a string of the value JSON text `text` parses to may hold a lone surrogate: false
 * proves none does, without parsing. JSON.stringify escapes every lone surrogate and writes
 * pairs as they are, so a text the gateway wrote trips this only when it does hold one.
 */
export function mayHoldLoneSurrogate(text: string): boolean {
  // indexOf first: most texts hold no escape at all, and it is a fraction of the pattern's cost.
  return (text.indexOf('\\u') !== -1 && SURROGATE_ESCAPE.test(text)) || !isWellFormedString(text);
}

/** Whether a parsed JSON value holds a string, as a value or a key, with a lone surrogate. */
export function holdsLoneSurrogate(value: unknown): boolean {
  // Iterative: the value may nest as deep as anything JSON.parse took.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') {
      if (!isWellFormedString(item)) return true;
    } else if (Array.isArray(item)) {
      for (const child of item) stack.push(child);
    } else if (typeof item === 'object' && item !== null) {
      for (const key of Object.keys(item)) {
        if (!isWellFormedString(key)) return true;
        stack.push((item as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

/** Whether the value of JSON text `text` holds a string with a lone surrogate. */
export function jsonHoldsLoneSurrogate(text: string): boolean {
  return mayHoldLoneSurrogate(text) && holdsLoneSurrogate(JSON.parse(text));
}

/** Why a message holding a lone surrogate is not sent in `encoding` (short: a close reason). */
export function loneSurrogateReason(encoding: string): string {
  return `holds a lone surrogate, which ${encoding} strings (UTF-8) cannot carry`;
}
