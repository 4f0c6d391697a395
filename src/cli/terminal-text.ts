/**
 * Text a server chose (an error message, a close reason, a response body, a header), made safe
 * to write to a terminal. A terminal takes control characters as commands: ESC starts escape
 * sequences (set the window title, erase a line, hide all that follows), CR and LF move the
 * cursor so a forged line can stand in for the CLI's own, BEL rings, and the C1 range
 * (U+0080-U+009F) holds one-character forms of the same commands (U+009B is CSI). The
 * bidirectional controls reorder or hide what a person reads (Trojan Source: an override shows
 * what follows it backwards, an isolate left open hides the rest of the line), and U+2028 and
 * U+2029 break a line where some terminals do. So these (TERMINAL_CONTROL) are written as
 * visible escapes. TAB, CR and LF included: a server's text is printed inside one line of the
 * CLI's, and a TAB moves the cursor by the terminal's tab stops, which the server can set with
 * an escape sequence it sent before. Other characters pass unchanged (right-to-left letters
 * too); a backslash is not escaped, so the output is for reading, not for decoding back.
 */

/**
 * Longest server text written in one piece, in characters (UTF-16 code units) after escaping;
 * past it the text is cut and a marker says how many characters were left out.
 */
export const MAX_TERMINAL_TEXT = 4096;

/**
 * The characters a terminal acts on rather than shows: Unicode's control characters (general
 * category Cc: C0, DEL, C1), the bidirectional embeddings, overrides and isolates
 * (U+202A-U+202E, U+2066-U+2069) and marks (LRM U+200E, RLM U+200F, ALM U+061C), and the line
 * and paragraph separators (U+2028, U+2029). All are in the BMP.
 */
export const TERMINAL_CONTROL = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

const short: Readonly<Record<number, string>> = { 0x09: '\\t', 0x0a: '\\n', 0x0d: '\\r' };

/** `\n`, `\r`, `\t`, or `\u001b`, `\u202e` for the other control characters. */
function escaped(code: number): string {
  return short[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` with every control character escaped visibly (`\n`, `\u001b`, `\u009b`, `\u202e`), cut
 * to `max` characters of that escaped text (an escape is never split, nor a surrogate pair), and
 * then ` ...[N more characters cut]` when anything was left out (N counts `text`'s characters).
 * The identity on text of printable characters within `max`.
 */
export function terminalText(text: string, max: number = MAX_TERMINAL_TEXT): string {
  if (text.length <= max && !TERMINAL_CONTROL.test(text)) return text;
  let out = '';
  let at = 0;
  while (at < text.length) {
    const code = text.codePointAt(at)!;
    const units = code > 0xffff ? 2 : 1;
    const char = text.slice(at, at + units);
    const piece = TERMINAL_CONTROL.test(char) ? escaped(code) : char;
    if (out.length + piece.length > max) break;
    out += piece;
    at += units;
  }
  return at < text.length ? `${out} ...[${text.length - at} more characters cut]` : out;
}
