import { TERMINAL_CONTROL } from './terminal-text.js';

/**
 * What JSON.stringify writes raw that a terminal acts on: TERMINAL_CONTROL but C0. JSON.stringify
 * escapes C0 inside strings itself, and outside strings writes only the newlines and spaces of
 * its indentation. Every other character of TERMINAL_CONTROL can only stand inside a string (a
 * key or a value), never right after an escaping backslash (those escape ASCII characters), so
 * writing it as `\uXXXX` there leaves the JSON text meaning the same value.
 */
const RAW_CONTROL = new RegExp(`(?![\\u0000-\\u001f])${TERMINAL_CONTROL.source}`, 'gu');

/**
 * `value` as JSON text (indented by `indent` spaces when given) that is safe to write to a
 * terminal: DEL, the C1 controls, the bidirectional controls and U+2028/U+2029 are written as
 * `\uXXXX` escapes in keys and values alike, so a server's JSON cannot drive the terminal or
 * reorder what a person reads; JSON.parse of the text gives the value back unchanged. A value
 * without JSON text (undefined) is written as null; one JSON.stringify rejects (a cycle, a
 * BigInt) throws as it does.
 */
export function jsonText(value: unknown, indent?: number): string {
  const text = JSON.stringify(value, null, indent) ?? 'null';
  return text.replace(
    RAW_CONTROL,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
