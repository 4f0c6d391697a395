import { isUtf8 } from 'node:buffer';
import { trimJsonWhitespace } from './ndjson-lines.js';

const NEWLINE = 0x0a;
/**
 * Pieces of a line shorter than this are copied together into a buffer (grown by doubling up to
 * GATHER_BYTES, then another), not held as they came: a read is a Buffer of its own (some hundreds
 * of bytes of objects and allocation besides its bytes), so a line read a byte at a time would
 * hold that much per byte, far past what its count of bytes bounds.
 */
const SMALL_PIECE_BYTES = 1024;
const GATHER_BYTES = 16 * 1024;
const MIN_GATHER_BYTES = 64;

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
  /** Where small pieces are copied together, and how much of it holds them (see GATHER_BYTES). */
  private gather: Buffer | undefined;
  private gathered = 0;
  /** Bytes held in `pieces` and `gather`. */
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
      this.hold(rest);
      this.held += rest.length;
    }
    return lines;
  }

  /** Keep `piece` of the line not ended yet: as it is, or a small one copied into `gather`. */
  private hold(piece: Uint8Array): void {
    if (piece.length >= SMALL_PIECE_BYTES) {
      this.closeGather();
      this.pieces.push(piece);
      return;
    }
    const needed = this.gathered + piece.length;
    if (this.gather && needed > this.gather.length) {
      if (this.gather.length >= GATHER_BYTES) this.closeGather();
      else {
        // Grown by doubling, so what it holds is at least half of it, and each byte is copied
        // a bounded number of times.
        const grown = Buffer.allocUnsafeSlow(
          Math.min(GATHER_BYTES, Math.max(needed, this.gather.length * 2)),
        );
        grown.set(this.gather.subarray(0, this.gathered));
        this.gather = grown;
      }
    }
    // allocUnsafeSlow: a buffer of its own, not a slice of the shared pool it would keep alive.
    this.gather ??= Buffer.allocUnsafeSlow(Math.max(MIN_GATHER_BYTES, piece.length * 2));
    this.gather.set(piece, this.gathered);
    this.gathered += piece.length;
  }

  /** What `gather` holds, as a piece in its place: the pieces after it go after it. */
  private closeGather(): void {
    if (!this.gather) return;
    this.pieces.push(this.gather.subarray(0, this.gathered));
    this.gather = undefined;
    this.gathered = 0;
  }

  /** The input has ended: what is held, as its last line (none when only JSON whitespace is). */
  end(): ByteLine | undefined {
    const last: ByteLine[] = [];
    if (this.held > 0) this.keep(this.take(new Uint8Array(0)), last);
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
    this.gather = undefined;
    this.gathered = 0;
    this.held = 0;
  }

  /** The held pieces and `tail`, as one line's bytes; nothing is held afterwards. */
  private take(tail: Uint8Array): Buffer {
    this.closeGather();
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
