import { isWhitespace as isJsonWhitespace } from '../protocol/json-members.js';

/**
 * `text` without the JSON whitespace at its ends. Not String.prototype.trim, which also takes
 * off what JSON does not count as whitespace (U+00A0, a byte order mark, U+2028, vertical tab,
 * form feed...): a line `\u00a0{...}` is no JSON text, and must be answered -32700 as on the
 * other transports, not run.
 */
export function trimJsonWhitespace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isJsonWhitespace(text.charCodeAt(start))) start++;
  while (end > start && isJsonWhitespace(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/**
 * Newline-delimited JSON framing, for both ends: chunks in, whole lines out (trimmed of JSON
 * whitespace, those that held nothing else dropped), and what is left held for the next chunk. Each character is looked at a
 * bounded number of times, however the input is cut: only the new chunk is searched for a
 * newline, and the held part's size is kept as a running count rather than re-measured, so a
 * 1 MB line sent 200 bytes at a time costs what one write of it costs.
 */
export class LineSplitter {
  /** The line not ended yet, in pieces (joined once, when its newline comes). */
  private pieces: string[] = [];
  /** UTF-8 bytes held in `pieces`. */
  private held = 0;
  /**
   * Characters examined so far: each chunk once when searched for newlines, and each held piece
   * once more when measured. Linear in the input; exposed so tests can say so without a clock.
   */
  scanned = 0;

  /** UTF-8 bytes of the line not ended yet. */
  get heldBytes(): number {
    return this.held;
  }

  /** Add `chunk` (whole characters: a stream decoded as UTF-8); returns the lines it ends, in order. */
  push(chunk: string): string[] {
    const lines: string[] = [];
    let from = 0;
    let newline = chunk.indexOf('\n');
    while (newline !== -1) {
      this.keep(this.take(chunk.slice(from, newline)), lines);
      from = newline + 1;
      newline = chunk.indexOf('\n', from);
    }
    this.scanned += chunk.length;
    if (from < chunk.length) {
      const rest = from === 0 ? chunk : chunk.slice(from);
      this.pieces.push(rest);
      this.held += Buffer.byteLength(rest);
      this.scanned += rest.length;
    }
    return lines;
  }

  /** The input has ended: what is held, as its last line (none when only JSON whitespace is). */
  end(): string | undefined {
    const last: string[] = [];
    if (this.pieces.length > 0) this.keep(this.take(''), last);
    return last[0];
  }

  /** Drop what is held (a line over the limit is thrown away). */
  clear(): void {
    this.pieces = [];
    this.held = 0;
  }

  /** The held pieces and `tail`, as one line; nothing is held afterwards. */
  private take(tail: string): string {
    if (this.pieces.length === 0) return tail;
    this.pieces.push(tail);
    const line = this.pieces.join('');
    this.clear();
    return line;
  }

  private keep(line: string, lines: string[]): void {
    const trimmed = trimJsonWhitespace(line);
    if (trimmed.length > 0) lines.push(trimmed);
  }
}
