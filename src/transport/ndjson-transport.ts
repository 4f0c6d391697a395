import type { Readable, Writable } from 'node:stream';
import { CloseCode } from './transport.js';
import type { EncodedFrame, ServerTransport, TransportListener } from './transport.js';
import { splitLines } from './ndjson-lines.js';
import { atEndOfTurn } from './turn-coalescer.js';

const NEWLINE = 0x0a;

/** A fan-out frame as one NDJSON line: its bytes and a newline, built once per publish. */
function ndjsonLine(bytes: Uint8Array): Buffer {
  const line = Buffer.allocUnsafe(bytes.length + 1);
  line.set(bytes, 0);
  line[bytes.length] = NEWLINE;
  return line;
}

export interface NdjsonTransportOptions {
  kind: 'tcp' | 'stdio';
  /** Longest line accepted; a longer one gets a -32600 error line and the stream is closed. */
  maxLineBytes: number;
  /** How long a close waits for the peer to finish before the streams are destroyed. Default 2 000 ms. */
  closeGraceMs?: number;
  /**
   * Called when the input ends while the output is still open (half-close). Without it the
   * transport closes at once; with it, the owner closes once the calls in flight are answered.
   */
  onInputEnd?: () => void;
}

/**
 * Newline-delimited JSON over a byte stream, one JSON-RPC message (or batch) per line, as
 * language servers' and MCP's stdio transports carry them: a TCP socket (readable and writable
 * are the same stream) or a process's stdin and stdout. Writes of one turn are corked into one.
 */
export class NdjsonTransport implements ServerTransport {
  private listener: TransportListener | undefined;
  private early: string[] | undefined;
  private partial = '';
  private corkedTurn = false;
  private closed = false;
  private closing = false;
  private inputEnded = false;
  private closeTimer: ReturnType<typeof setTimeout> | undefined;
  readonly canPush = true;
  readonly kind: 'tcp' | 'stdio';

  constructor(
    private readonly readable: Readable,
    private readonly writable: Writable,
    private readonly options: NdjsonTransportOptions,
  ) {
    this.kind = options.kind;
    readable.setEncoding('utf8');
    readable.on('data', this.onChunk);
    readable.on('end', () => {
      this.inputEnded = true;
      this.flushPartial(); // a last line without its newline is still a message
      // Half-closed: the other side sent everything (`echo request | server`) and waits for
      // the replies. The owner lets the calls finish, then closes.
      if (options.onInputEnd) options.onInputEnd();
      else this.finish(CloseCode.Normal, 'end of input');
    });
    readable.on('close', () => {
      if (!this.inputEnded || !options.onInputEnd || this.sameStream)
        this.finish(CloseCode.Normal, 'closed');
    });
    readable.on('error', () => this.finish(CloseCode.Abnormal, 'read error'));
    if (!this.sameStream) {
      writable.on('error', () => this.finish(CloseCode.Abnormal, 'write error'));
      writable.on('close', () => this.finish(CloseCode.Normal, 'closed'));
    }
  }

  /** Uncork at the end of the turn (called by turn-coalescer). */
  endTurn(): void {
    if (!this.corkedTurn) return;
    this.corkedTurn = false;
    this.writable.uncork();
  }

  get bufferedAmount(): number {
    return this.writable.writableLength;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
    const early = this.early;
    this.early = undefined;
    if (early) for (const text of early) listener.receive(text);
  }

  send(frame: string | EncodedFrame): void {
    if (this.closed || this.closing || this.writable.writableEnded || this.writable.destroyed)
      return;
    if (!this.corkedTurn) {
      this.corkedTurn = true;
      this.writable.cork();
      atEndOfTurn(this);
    }
    // JSON text never contains a raw newline (JSON.stringify escapes them), so a line is a message.
    this.writable.write(typeof frame === 'string' ? `${frame}\n` : frame.wire(ndjsonLine));
  }

  /** A socket (TCP) rather than a pair of pipes (stdio). */
  private get sameStream(): boolean {
    return (this.readable as unknown) === (this.writable as unknown);
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    if (this.closed || this.closing) return;
    this.closing = true;
    this.endTurn();
    this.writable.end();
    // A peer that never finishes its side must not hold the stream forever.
    this.closeTimer = setTimeout(() => {
      this.readable.destroy();
      this.writable.destroy();
      this.finish(code, reason);
    }, this.options.closeGraceMs ?? 2_000);
    this.closeTimer.unref();
    if (!this.sameStream) this.finish(code, reason); // stdio: nothing more to wait for
  }

  onDrain(listener: () => void): () => void {
    if (this.writable.writableLength === 0) {
      const timer = setTimeout(listener, 0);
      return () => clearTimeout(timer);
    }
    this.writable.once('drain', listener);
    return () => this.writable.off('drain', listener);
  }

  private readonly onChunk = (chunk: string): void => this.onData(chunk);

  private onData(chunk: string): void {
    // Closing or closed: what still arrives is thrown away, not buffered.
    if (this.closing || this.closed) return;
    const { lines, rest } = splitLines(this.partial, chunk);
    this.partial = rest;
    for (const line of lines) {
      if (this.closing || this.closed) return; // a line closed it (too large): drop the rest
      this.deliver(line);
    }
    if (Buffer.byteLength(this.partial) > this.options.maxLineBytes) this.tooLarge();
  }

  private flushPartial(): void {
    const line = this.partial.trim();
    this.partial = '';
    if (line.length > 0 && !this.closing && !this.closed) this.deliver(line);
  }

  /** A line over the limit: say why on the wire (there is no close code to carry it), then close. */
  private tooLarge(): void {
    if (this.closing) return;
    this.partial = '';
    this.send(
      `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Message too large","data":{"maxMessageBytes":${this.options.maxLineBytes}}},"id":null}`,
    );
    this.close(CloseCode.MessageTooBig, 'message too large');
  }

  private deliver(line: string): void {
    if (Buffer.byteLength(line) > this.options.maxLineBytes) return this.tooLarge();
    if (this.listener) this.listener.receive(line);
    else (this.early ??= []).push(line);
  }

  private finish(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.closeTimer);
    this.readable.off('data', this.onChunk);
    // A pipe (stdio) has no other end to wait for: stop reading it so nothing more is held.
    if (!this.sameStream) this.readable.destroy();
    this.listener?.transportClosed(code, reason);
  }
}
