/*
 * A walk over JSON text (valid JSON: JSON.parse took it) that finds, for each message of a frame
 * (the frame itself, or each member of a batch), where the value of its last member of a given
 * name lies: the last, as JSON.parse keeps the last of duplicate members. For what the parsed
 * value cannot tell: the text a number was written as (id-text.ts, params-text.ts).
 */

/** Character codes of JSON's structure, for the walks over JSON text (here, proto-keys.ts). */
export const QUOTE = 34;
const BACKSLASH = 92;
export const COMMA = 44;
export const COLON = 58;
export const OPEN_BRACE = 123;
export const OPEN_BRACKET = 91;
export const CLOSE_BRACE = 125;
export const CLOSE_BRACKET = 93;
const MINUS = 45;
const PLUS = 43;
const DOT = 46;
const DIGIT_0 = 48;
const DIGIT_9 = 57;
const LOWER_E = 101;
const UPPER_E = 69;

/** Space, tab, LF and CR: the only whitespace JSON allows around a value (RFC 8259, section 2). */
export function isWhitespace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

/** A character a JSON number can hold. */
export function isNumberChar(c: number): boolean {
  return (
    (c >= DIGIT_0 && c <= DIGIT_9) ||
    c === MINUS ||
    c === PLUS ||
    c === DOT ||
    c === LOWER_E ||
    c === UPPER_E
  );
}

/** Whether the character starts a JSON number. */
export function startsNumber(c: number): boolean {
  return c === MINUS || (c >= DIGIT_0 && c <= DIGIT_9);
}

/** Index of the quote that closes the string opening at `open`. */
export function stringEnd(text: string, open: number): number {
  let i = open + 1;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) return i;
    i += c === BACKSLASH ? 2 : 1;
  }
}

/** Whether the string token text[open..close] reads `name` (escapes decoded, as JSON.parse does). */
function keyIs(text: string, open: number, close: number, name: string): boolean {
  if (close - open === name.length + 1) return text.startsWith(name, open + 1);
  // Otherwise only escapes can spell it ("\u0069d"): at most six characters each.
  if (close - open > 6 * name.length + 1) return false;
  const token = text.slice(open, close + 1);
  return token.includes('\\') && JSON.parse(token) === name;
}

/** Where a value of the message just left off ends: `,`, `}`, `]` or whitespace. */
function endsValue(c: number): boolean {
  return c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isWhitespace(c);
}

/**
 * For each message of the frame `text` (a batch's members by their place in it; a lone message
 * at 0), the span [start, end) of the value of its last member named `name`; none for a message
 * without one.
 */
export function memberValueSpans(
  text: string,
  batch: boolean,
  name: string,
): ([number, number] | undefined)[] {
  const out: ([number, number] | undefined)[] = [];
  const messageDepth = batch ? 2 : 1;
  let depth = 0;
  let index = 0;
  /** The container at messageDepth is an object: its strings alternate key, value. */
  let inObject = false;
  let expectKey = false;
  /** The key just read is `name`: its value comes next. */
  let wanted = false;
  /** Where the wanted value opens, when it is an object or an array; -1 otherwise. */
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const close = stringEnd(text, i);
      if (depth === messageDepth && inObject && expectKey) {
        wanted = keyIs(text, i, close, name);
        expectKey = false;
      } else if (depth === messageDepth) {
        if (wanted) out[index] = [i, close + 1];
        wanted = false;
      }
      i = close;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
      if (depth === messageDepth) {
        inObject = c === OPEN_BRACE;
        expectKey = inObject;
        wanted = false;
      } else if (depth === messageDepth + 1 && wanted) {
        start = i;
        wanted = false;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth === messageDepth + 1 && start >= 0) {
        out[index] = [start, i + 1];
        start = -1;
      }
      depth--;
    } else if (c === COMMA) {
      if (depth === messageDepth - 1) index++;
      else if (depth === messageDepth && inObject) {
        expectKey = true;
        wanted = false;
      }
    } else if (depth === messageDepth && wanted && c !== COLON && !isWhitespace(c)) {
      // A number, true, false or null.
      let end = i + 1;
      while (end < text.length && !endsValue(text.charCodeAt(end))) end++;
      out[index] = [i, end];
      wanted = false;
      i = end - 1;
    }
  }
  return out;
}
