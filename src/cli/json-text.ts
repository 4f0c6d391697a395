import { writeKeptNumbers } from './kept-numbers.js';
import { ESCAPED_CHARACTER, keptSequenceAt } from './terminal-text.js';

/**
 * What JSON.stringify writes raw that a terminal acts on or shows as nothing: ESCAPED_CHARACTER
 * but C0 and surrogates. JSON.stringify escapes C0 and a lone surrogate inside strings itself,
 * and outside strings writes only the newlines and spaces of its indentation. Every other
 * character of ESCAPED_CHARACTER can only stand inside a string (a key or a value), never right
 * after an escaping backslash (those escape ASCII characters), so writing it as `\uXXXX` there
 * leaves the JSON text meaning the same value.
 */
const RAW_ESCAPED = `[${ESCAPED_CHARACTER.source}--[\\0-\\x1f]]`;
const ANY_RAW_ESCAPED = new RegExp(RAW_ESCAPED, 'v');

/**
 * A character to escape, or one of JSON.stringify's own escapes (`\"`, `\\`, `\n`, `\u001b`,
 * `\udc00`) taken whole so that what follows is read from after it: a digit ending `\u0010` is
 * never the start of a keycap.
 */
const PIECE = new RegExp(`\\\\(?:u[0-9a-f]{4}|.)|${RAW_ESCAPED}`, 'gv');

/** Where the code point before `at` in `text` starts. */
function before(text: string, at: number): number {
  return at >= 2 && text.codePointAt(at - 2)! > 0xffff ? at - 2 : at - 1;
}

/**
 * Where the sequence of KEPT_SEQUENCE that holds the character at `at` ends, when one does, as
 * terminalText's reading from `from` on finds it: such a sequence holds a character of
 * ESCAPED_CHARACTER within two code points of its start, and none stands between `from` and
 * `at`, so it starts at `at` or one or two code points before it. Searching only there keeps
 * the slow search for an emoji sequence off all the text that holds nothing to escape.
 */
function keptTo(text: string, from: number, at: number): number | undefined {
  const one = before(text, at);
  for (const start of [before(text, one), one, at]) {
    if (start < from) continue;
    const kept = keptSequenceAt(text, start);
    if (kept !== undefined) return start + kept.length;
  }
  return undefined;
}

/** `\uXXXX` for each UTF-16 unit of `char`: a surrogate pair for an astral character. */
function escaped(char: string): string {
  let out = '';
  for (let at = 0; at < char.length; at++) {
    out += `\\u${char.charCodeAt(at).toString(16).padStart(4, '0')}`;
  }
  return out;
}

/**
 * `value` as JSON text (indented by `indent` spaces when given) that is safe to write to a
 * terminal: DEL, the C1 controls, the format characters (bidirectional controls, zero-width
 * characters, tag characters), the default-ignorables and U+2028/U+2029 are written as `\uXXXX`
 * escapes in keys and values alike, where terminalText escapes them (legitimate emoji and joined
 * script stay as they are), so a server's JSON cannot drive the terminal, reorder what a person
 * reads or hide text in it; JSON.parse of the text gives the value back unchanged. A number a
 * double cannot hold, kept as a marked string (keepNumbers), is written as the server wrote it.
 * A value without JSON text (undefined) is written as null; one JSON.stringify rejects (a cycle,
 * a BigInt) throws as it does.
 */
export function jsonText(value: unknown, indent?: number): string {
  const text = writeKeptNumbers(JSON.stringify(value, null, indent) ?? 'null');
  if (!ANY_RAW_ESCAPED.test(text)) return text;
  // Read as terminalText reads: on from the end of the last escape or kept sequence.
  let from = 0;
  return text.replace(PIECE, (piece: string, at: number) => {
    if (at < from) return piece; // inside a kept sequence
    if (piece.startsWith('\\')) {
      from = at + piece.length;
      return piece;
    }
    const end = keptTo(text, from, at);
    from = end ?? at + piece.length;
    return end === undefined ? escaped(piece) : piece;
  });
}

/**
 * The length of `JSON.stringify(value, null, indent)` (in UTF-16 code units), counted without
 * writing it, for a value JSON.parse made; once the count passes `stopPast` it stops, and the
 * length returned is only known to be larger. Indentation repeats per element: an array of many
 * elements nested deep takes far more indented than compact (an element per line, after 2 spaces
 * per level), more than a string can hold. A kept number (keepNumbers) is counted as its marked
 * string, longer than the number written: the count errs long, never short.
 */
export function jsonTextLength(value: unknown, indent = 0, stopPast = Infinity): number {
  const newline = indent > 0 ? 1 : 0;
  const colon = indent > 0 ? 2 : 1; // ': ' or ':'
  let total = 0;
  const measure = (item: unknown, level: number): void => {
    if (total > stopPast) return;
    if (item === null || typeof item === 'boolean') {
      total += String(item).length;
    } else if (typeof item === 'number') {
      total += Number.isFinite(item) ? String(item).length : 4; // null
    } else if (typeof item === 'string') {
      total += JSON.stringify(item).length;
    } else if (Array.isArray(item)) {
      total += 2;
      if (item.length === 0) return;
      // Each element on its line, one level in; the closing bracket on its own.
      total += item.length * (newline + (level + 1) * indent) + (item.length - 1);
      total += newline + level * indent;
      for (const element of item as unknown[]) {
        if (element === undefined || typeof element === 'function' || typeof element === 'symbol')
          total += 4; // null
        else measure(element, level + 1);
        if (total > stopPast) return;
      }
    } else if (typeof item === 'object') {
      total += 2;
      let entries = 0;
      for (const [key, member] of Object.entries(item)) {
        if (member === undefined || typeof member === 'function' || typeof member === 'symbol')
          continue;
        entries++;
        total += newline + (level + 1) * indent + JSON.stringify(key).length + colon;
        measure(member, level + 1);
        if (total > stopPast) return;
      }
      if (entries > 0) total += entries - 1 + newline + level * indent;
    } else {
      // undefined and the like at the top (written as null), or what JSON cannot write (a
      // BigInt: JSON.stringify throws when it comes to it).
      total += 4;
    }
  };
  measure(value, 0);
  return total;
}
