/**
 * Text a server chose (an error message, a close reason, a response body, a header), made safe
 * to write to a terminal. A terminal takes control characters as commands: ESC starts escape
 * sequences (set the window title, erase a line, hide all that follows), CR and LF move the
 * cursor so a forged line can stand in for the CLI's own, BEL rings, and the C1 range
 * (U+0080-U+009F) holds one-character forms of the same commands (U+009B is CSI). So every
 * Unicode control character (general category Cc: C0, DEL, C1) is written as a visible escape.
 * TAB, CR and LF included: a server's text is printed inside one line of the CLI's, and a TAB
 * moves the cursor by the terminal's tab stops, which the server can set with an escape
 * sequence it sent before. Other characters pass unchanged; a backslash is not escaped, so the
 * output is for reading, not for decoding back.
 */

/**
 * Longest server text written in one piece, in characters (UTF-16 code units) after escaping;
 * past it the text is cut and a marker says how many characters were left out.
 */
export const MAX_TERMINAL_TEXT = 4096;

const CONTROL = /\p{Cc}/u;
const short: Readonly<Record<number, string>> = { 0x09: '\\t', 0x0a: '\\n', 0x0d: '\\r' };

/** `\n`, `\r`, `\t`, or `\u001b` for the other control characters. */
function escaped(code: number): string {
  return short[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
}

function isControl(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

/**
 * `text` with every control character escaped visibly (`\n`, `\u001b`, `\u009b`), cut to `max`
 * characters of that escaped text (an escape is never split, nor a surrogate pair), and then
 * ` ...[N more characters cut]` when anything was left out (N counts `text`'s characters).
 * The identity on text of printable characters within `max`.
 */
export function terminalText(text: string, max: number = MAX_TERMINAL_TEXT): string {
  if (text.length <= max && !CONTROL.test(text)) return text;
  let out = '';
  let at = 0;
  while (at < text.length) {
    const code = text.codePointAt(at)!;
    const units = code > 0xffff ? 2 : 1;
    const piece = isControl(code) ? escaped(code) : text.slice(at, at + units);
    if (out.length + piece.length > max) break;
    out += piece;
    at += units;
  }
  return at < text.length ? `${out} ...[${text.length - at} more characters cut]` : out;
}
