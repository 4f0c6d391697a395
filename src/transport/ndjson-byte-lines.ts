import { isUtf8 } from 'node:buffer';
import { trimJsonWhitespace } from './ndjson-lines.js';

const NEWLINE = 0x0a;

/** A line whose bytes are not UTF-8: no JSON text (RFC 8259, section 8.1), answered -32700. */
export const NOT_UTF8 = Symbol('not UTF-8');
/** A line longer than the bound (trimmed, in UTF-8 bytes). */
export const TOO_LARGE = Symbol('too large');

/** One line read: its text (trimmed of JSON whitespace, never empty), or why it is no message. */
export type ByteLine = string | typeof NOT_UTF8 | typeof TOO_LARGE;

/**
 * Newline-delimited JSON framing on bytes, for a server's input: chunks of bytes in, whole
 * lines out, each decoded as UTF-8 on its own once its newline has come. A line that is not
 * UTF-8 comes out as NOT_UTF8 rather than with U+FFFD in place of its bad bytes; a character
 * cut between two chunks is read whole (a newline byte never occurs inside a UTF-8 sequence,
 * so cutting at newlines never cuts one). Lines are trimmed of JSON whitespace (trimJsonWhitespace)
 * and those that held nothing else dropped. Each byte
 * is searched for a newline once, however the input is cut; the held part's size is a count.
 */
export class ByteLineSplitter {
  /** The line not ended yet, in pieces (joined once, when its newline comes). */
  private pieces: Uint8Array[] = [];
  /** Bytes held in `pieces`. */
  private held = 0;
  /** Bytes searched for a newline so far; exposed so tests can say it is linear without a clock. */
  scanned = 0;
  /**
   * Bytes read that no line's text stands for since takeUncounted last took them: a line that is
   * not UTF-8, the whitespace trimmed off a line (a line of nothing else, all of it), the newlines.
   * An input budget charges them too, or a peer could send them without limit.
   */
  private uncounted = 0;

  constructor(private readonly maxLineBytes: number) {}

  /** Bytes of the line not ended yet. */
  get heldBytes(): number {
    return this.held;
  }

  /** Add `chunk`; returns the lines it ends, in order. */
  push(chunk: Uint8Array): ByteLine[] {
    const lines: ByteLine[] = [];
    let from = 0;
    let newline = chunk.indexOf(NEWLINE);
    while (newline !== -1) {
      this.uncounted++; // the newline
      this.keep(this.take(chunk.subarray(from, newline)), lines);
      from = newline + 1;
      newline = chunk.indexOf(NEWLINE, from);
    }
    this.scanned += chunk.length;
    if (from < chunk.length) {
      const rest = chunk.subarray(from);
      this.pieces.push(rest);
      this.held += rest.length;
    }
    return lines;
  }

  /** The input has ended: what is held, as its last line (none when only JSON whitespace is). */
  end(): ByteLine | undefined {
    const last: ByteLine[] = [];
    if (this.pieces.length > 0) this.keep(this.take(new Uint8Array(0)), last);
    return last[0];
  }

  /** The bytes read that no line's text stands for (see `uncounted`), since the last call. */
  takeUncounted(): number {
    const bytes = this.uncounted;
    this.uncounted = 0;
    return bytes;
  }

  /** Drop what is held (a line over the limit is thrown away). */
  clear(): void {
    this.pieces = [];
    this.held = 0;
  }

  /** The held pieces and `tail`, as one line's bytes; nothing is held afterwards. */
  private take(tail: Uint8Array): Buffer {
    const bytes =
      this.pieces.length === 0
        ? Buffer.from(tail.buffer, tail.byteOffset, tail.byteLength)
        : Buffer.concat([...this.pieces, tail]);
    this.clear();
    return bytes;
  }

  private keep(bytes: Buffer, lines: ByteLine[]): void {
    const over = bytes.length > this.maxLineBytes;
    if (!isUtf8(bytes)) {
      this.uncounted += bytes.length;
      lines.push(over ? TOO_LARGE : NOT_UTF8);
      return;
    }
    const text = bytes.toString('utf8');
    const line = trimJsonWhitespace(text);
    // JSON whitespace is one byte a character.
    this.uncounted += text.length - line.length;
    if (line.length === 0) return;
    // Measured again only when the bytes are over: what trim took off does not count.
    lines.push(over && Buffer.byteLength(line) > this.maxLineBytes ? TOO_LARGE : line);
  }
}
