import type { Readable, Writable } from 'node:stream';
import { CloseCode } from './transport.js';
import { byteCounted } from './byte-counted.js';
import type { EncodedFrame, PieceSource, ServerTransport, TransportListener } from './transport.js';
import { INVALID_UTF8_REPLY } from '../protocol/invalid-utf8.js';
import { ByteLineSplitter, NOT_UTF8, TOO_LARGE } from './ndjson-byte-lines.js';
import type { ByteLine } from './ndjson-byte-lines.js';
import type { BudgetLedger, BudgetMember } from './output-budget.js';
import {
  countOutput,
  directDeliveryAllowed,
  heldOutputSpent,
  outputSpent,
  queueHeld,
  keepWaiting,
  takePieces,
  dropsWaitingOutput,
  writeWaitingFrames,
} from './input-turns.js';
import type {
  HeldTurnTaker,
  Pieces,
  WaitingFrame,
  WaitingOutput,
  WaitingOutputWriter,
} from './input-turns.js';
import type { InputBudget, InputLimit, InputReader } from './ws-transport.js';
import { flushAfterTask, MAX_GATHERED_FRAMES } from './turn-coalescer.js';
import { whenDrained } from './when-drained.js';
import { CLOSE_NOTICE_PREFIX } from './ndjson-socket.js';

const NEWLINE = 0x0a;
const EMPTY = Buffer.alloc(0);
/** Bytes gathered under one cork before they are written anyway. */
const MAX_CORKED_BYTES = 64 * 1024;

/** A fan-out frame as one NDJSON line: its bytes and a newline, built once per publish. */
function ndjsonLine(bytes: Uint8Array): Buffer {
  const line = Buffer.allocUnsafe(bytes.length + 1);
  line.set(bytes, 0);
  line[bytes.length] = NEWLINE;
  return line;
}

/**
 * The line that ends an NDJSON connection the gateway closes, as a WebSocket's close frame
 * would: a JSON-RPC notification with the close code and reason (docs/wire-protocol.md).
 */
function closeNotice(code: number, reason: string): string {
  return `${CLOSE_NOTICE_PREFIX}${JSON.stringify({ code, reason })}}`;
}

export interface NdjsonTransportOptions {
  kind: 'tcp' | 'stdio';
  /**
   * Longest line accepted, in bytes; a longer one gets a -32600 error line and the stream is
   * closed.
   */
  maxLineBytes: number;
  /**
   * How long a close waits for the output to be written (and, on TCP, for the peer to close its
   * side) before the streams are destroyed. Default 2 000 ms. After the input has ended, a close
   * waits until the end-of-input deadline instead, if that is later.
   */
  closeGraceMs?: number;
  /**
   * Called when the input ends while the output is still open (EOF, TCP half-close), with the
   * deadline (a `Date.now()` time, `endOfInputDeadlineMs` away) by which the calls sent before
   * it are to be answered and the answers read. Without it the transport closes at once; with
   * it, the owner closes once the calls in flight are answered, and that close waits for the
   * output to be written, up to the same deadline, however slowly the peer reads.
   */
  onInputEnd?: (deadline: number) => void;
  /** See `onInputEnd`. Default 30 000 ms. */
  endOfInputDeadlineMs?: number;
  /**
   * Stop reading the input while more than this many bytes are queued on the output (a peer
   * that sends but does not read), until the output has drained to half of it. 0 (default)
   * never stops.
   */
  maxBufferedBytes?: number;
  /** Message counts, shared by a server's transports, for metrics. */
  counters?: { messagesIn: number; messagesOut: number };
  /**
   * The input budget (limits.bytesPerSecond, and its address's bytesPerSecondPerIp), as a
   * WebSocket connection has: each line costs its UTF-8 bytes, at least `messageCostBytes`, and
   * past the budget reading stops until it has refilled (nothing is refused or lost). Released
   * when the transport closes. None: not bounded.
   */
  inputLimit?: InputLimit;
  /** The least a line costs `inputLimit`. Default 0. */
  messageCostBytes?: number;
}

/**
 * Newline-delimited JSON over a byte stream, one JSON-RPC message (or batch) per line, as
 * language servers' and MCP's stdio transports carry them: a TCP socket (readable and writable
 * are the same stream) or a process's stdin and stdout. Writes made together are corked into one
 * (turn-coalescer), up to 64 KiB.
 * The input is read as bytes and each line decoded on its own: a line that is not UTF-8 is
 * answered -32700 (id null, `data.reason` "invalid UTF-8") and reading goes on, as it does
 * after a line with a syntax error; NDJSON has no close code to carry it, as 1007 does on a
 * WebSocket.
 * With `maxBufferedBytes`, reading pauses while the peer leaves too much of its output unread.
 *
 * Lines are handed to the session as they are read up to DIRECT_MESSAGES_PER_TURN a turn, all
 * connections together (WebSocket ones too); past it, and after reading was paused, they are
 * held and handed over in turns with the WebSocket connections' held messages (queueHeld,
 * HELD_MESSAGES_PER_TURN), in order, reading resumed once they are.
 *
 * A close ends the output and is complete (`transportClosed`) once what was written has been
 * handed to the operating system (stdio: the writable's 'finish'; TCP: the socket closed), or
 * when the grace (or, after the input ended, the end-of-input deadline) runs out and the
 * streams are destroyed.
 */
export class NdjsonTransport
  implements ServerTransport, BudgetMember, InputReader, HeldTurnTaker, WaitingOutputWriter
{
  private listener: TransportListener | undefined;
  /** Lines not handled yet: before `listen`, or while reading is paused. */
  private held: ByteLine[] | undefined;
  private heldFrom = 0;
  /** Characters of the lines in `held` not handled yet (their share of budgetBytes). */
  private heldChars = 0;
  /** Its held lines wait for a turn (queueHeld): reading waits for them. */
  private heldQueued = false;
  /** Set while reading is paused: stops the wait for the output to drain. */
  private cancelResume: (() => void) | undefined;
  /** The input ended while lines were still held: handled once they are. */
  private endPending = false;
  /** The framing: incoming chunks cut into lines; public for tests (its `scanned` count). */
  readonly lines: ByteLineSplitter;
  private corked = false;
  /** Lines written under the present cork (MAX_GATHERED_FRAMES). */
  private gathered = 0;
  private closed = false;
  private closing = false;
  private inputEnded = false;
  /** Set when the input ends: by then the calls it carried are answered and the answers read. */
  private endOfInputDeadline: number | undefined;
  /** The close code and reason, kept for when the close completes. */
  private closingWith: [number, string] | undefined;
  private closeTimer: ReturnType<typeof setTimeout> | undefined;
  /**
   * Lines sent once the turn's output was spent (outputSpent), and every line sent after them,
   * in order, waiting for output turns (queueOutput), with the characters (bytes, for a shared
   * frame) of those left; a function is called in its place (a frame made as it is written, an
   * onWritten wait). A close waits for them (closeWaits).
   */
  private waitingOutput: WaitingOutput | undefined;
  /** Closing: the output ends once what waits for an output turn has been written. */
  private closeWaits = false;
  /** A line sent in parts (sendPieces) is begun and not ended. */
  private lineOpen = false;
  /** The input budget, made at the first line (see NdjsonTransportOptions.inputLimit). */
  private inputBudget: InputBudget | undefined;
  /** The node-wide output budget this transport reports to, once it has joined one. */
  private budget: BudgetLedger | undefined;
  /** BudgetMember: what this transport last reported to its budget. */
  budgeted = 0;
  /**
   * The session's rate limit (limits.ratePerSecond), set by its owner once the session is open:
   * a line answered here rather than handed to the listener (not UTF-8) takes a token of it, as a
   * line the session answers does. Free, it would let a peer send without end while its calls
   * are rate limited. Undefined: no limit.
   */
  admit: { take(): boolean } | undefined = undefined;
  readonly canPush = true;
  readonly kind: 'tcp' | 'stdio';

  constructor(
    private readonly readable: Readable,
    private readonly writable: Writable,
    private readonly options: NdjsonTransportOptions,
  ) {
    this.kind = options.kind;
    this.lines = new ByteLineSplitter(options.maxLineBytes);
    readable.on('data', this.onChunk);
    readable.on('end', () => {
      this.inputEnded = true;
      // Lines still wait (paused, or not listened to yet): the end comes after them.
      if (this.held || this.cancelResume) this.endPending = true;
      else this.endOfInput();
    });
    readable.on('close', () => {
      // A socket (TCP) has closed both ways. A pipe (stdio): once closing, or once its end
      // was seen with an owner to close, what is left to wait for is the output.
      if (this.sameStream) this.finish(CloseCode.Normal, 'closed');
      else if (!this.closing && !(this.inputEnded && options.onInputEnd))
        this.finish(CloseCode.Normal, 'closed');
    });
    readable.on('error', () => this.finish(CloseCode.Abnormal, 'read error'));
    if (readable.readableEnded) {
      // Ended before this transport existed (while the owner's hooks ran): its 'end' has
      // been emitted already. Taken as just now, once the owner holds the transport.
      queueMicrotask(() => {
        if (this.inputEnded) return;
        this.inputEnded = true;
        this.endOfInput();
      });
    }
    if (!this.sameStream) {
      writable.on('error', () => this.finish(CloseCode.Abnormal, 'write error'));
      writable.on('close', () => this.finish(CloseCode.Normal, 'closed'));
    }
  }

  private endOfInput(): void {
    this.endPending = false;
    this.flushPartial(); // a last line without its newline is still a message
    // Half-closed: the other side sent everything (`echo request | server`) and waits for
    // the replies. The owner lets the calls finish, then closes; the close waits for the
    // replies to be written, up to the same deadline.
    const onInputEnd = this.options.onInputEnd;
    if (!onInputEnd) return this.finish(CloseCode.Normal, 'end of input');
    this.endOfInputDeadline = Date.now() + (this.options.endOfInputDeadlineMs ?? 30_000);
    onInputEnd(this.endOfInputDeadline);
  }

  /** Report to the node-wide output budget from now on (GatewayLimits.maxBufferedBytesTotal). */
  joinBudget(budget: BudgetLedger): void {
    this.budget = budget;
  }

  /**
   * BudgetMember: bytes queued for the peer, and the peer's input held here (the line not ended
   * yet, lines waiting while reading is paused), or 0 once closing (the buffers go with the
   * streams). The unfinished line counts: each connection may hold up to maxMessageBytes of one,
   * and every connection of the node may.
   */
  get budgetBytes(): number {
    if (this.closed) return 0;
    // Closing: what is held of the peer's input is dropped, its queue waits for it to read.
    if (this.closing) return this.bufferedAmount;
    return this.bufferedAmount + this.lines.heldBytes + this.heldChars;
  }

  /** Uncork: what was written since the cork leaves in one write (turn-coalescer, the 64 KiB cap). */
  flushWrites(): void {
    if (!this.corked) return;
    this.corked = false;
    this.gathered = 0;
    this.writable.uncork();
  }

  get bufferedAmount(): number {
    const waiting = this.waitingOutput;
    return this.writable.writableLength + (waiting === undefined ? 0 : waiting.chars);
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
    this.deliverHeld();
  }

  /** True while reading is paused because the peer has not read what it was sent. */
  get readingPaused(): boolean {
    return this.cancelResume !== undefined;
  }

  /**
   * Send one line: written now (gathered to the end of the task), or, once the text the sessions
   * sent in this turn has reached OUTPUT_CHARS_PER_TURN, in a later turn (queueOutput), this
   * connection's lines after it behind it, in order.
   */
  send(frame: string | EncodedFrame): void {
    if (this.closed || this.closing || this.writable.writableEnded || this.writable.destroyed)
      return;
    if (this.waitingOutput !== undefined || (typeof frame === 'string' && outputSpent()))
      return this.waitOutput(frame);
    this.write(frame);
  }

  outputWaits(): boolean {
    return this.waitingOutput !== undefined || outputSpent();
  }

  chargeOutput(chars: number): void {
    countOutput(chars);
  }

  /** Transport.sendMade: `make`'s text is made as it is written, in its output turn if it waits. */
  sendMade(make: () => string | undefined, written?: () => void): void {
    if (this.closed || this.closing || this.writable.writableEnded || this.writable.destroyed)
      return;
    if (this.waitingOutput !== undefined || outputSpent())
      this.waitOutput(() => this.writeMade(make, written));
    else this.writeMade(make, written);
  }

  private writeMade(make: () => string | undefined, written: (() => void) | undefined): true {
    const text = make();
    if (text !== undefined && this.writes) this.write(text);
    written?.();
    return true;
  }

  /** The output takes writes: not ended (a close's second half) nor destroyed. */
  private get writes(): boolean {
    return !this.writable.writableEnded && !this.writable.destroyed;
  }

  /** Transport.sendPieces: pieces made and written as the turn allows, the line in parts past it. */
  sendPieces(source: PieceSource, written?: () => void): void {
    if (this.closed || this.closing || !this.writes) return;
    const pieces: Pieces = { source, written, started: false };
    if (this.waitingOutput !== undefined || !this.writePieces(pieces)) {
      this.waitOutput(() => this.writePieces(pieces));
    }
  }

  /**
   * Make and write the line's pieces while the turn's output allows: all of them, unless it
   * began already, as one line; else what this turn made as the line's next part (the newline
   * with the last). Returns whether the line is complete.
   */
  private writePieces(pieces: Pieces): boolean {
    const taken = takePieces(pieces);
    if (taken === undefined) return false;
    if (!this.writes) {
      // Ended meanwhile: nothing more goes; the pieces are not made.
    } else if (taken.done && !pieces.started) this.write(taken.text, true);
    else this.writePart(taken.text, !pieces.started, taken.done);
    pieces.started = true;
    if (taken.done) pieces.written?.();
    return taken.done;
  }

  /** Part of a line sent in pieces; the last ends it. */
  private writePart(text: string, first: boolean, last: boolean): void {
    this.lineOpen = !last;
    this.cork();
    if (first && this.options.counters) this.options.counters.messagesOut++;
    this.writable.write(byteCounted(last ? `${text}\n` : text));
    this.afterWrite();
  }

  /**
   * Keep `frame` for an output turn, behind what waits already; a function is called in its
   * place (a frame made as it is written, an onWritten wait).
   */
  private waitOutput(frame: WaitingFrame): void {
    // Nothing more is read before it is written (readOn): a peer whose answers wait asks for no
    // more meanwhile.
    if (this.waitingOutput === undefined) this.readable.pause();
    this.waitingOutput = keepWaiting(this.waitingOutput, frame, this);
    this.budget?.report(this, this.budgetBytes);
  }

  /**
   * @internal This connection's part of an output turn (writeOutputTurn): write what waits, in
   * order, while the turn's output allows; then end the output if a close waits for it. Returns
   * whether nothing is left.
   */
  writeWaiting(): boolean {
    const waiting = this.waitingOutput;
    if (waiting === undefined) return true;
    try {
      const write = (frame: string | EncodedFrame): void => {
        if (this.writes) this.write(frame);
      };
      if (!writeWaitingFrames(waiting, () => !this.closed, write)) return false;
    } catch {
      // Nothing here throws (the frames are made by code that does not): should it, the
      // connection closes rather than wait for ever, and the turn goes on with the others.
      this.waitingOutput = undefined;
      if (this.closeWaits) this.endOutput();
      else this.close(CloseCode.InternalError, 'output failed');
      return true;
    }
    this.waitingOutput = undefined;
    if (this.closeWaits) {
      if (!this.closed) this.endOutput();
      return true;
    }
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    this.readOn();
    return true;
  }

  /** Write one line (gathered to the end of the task); `counted`: its text is counted already. */
  private write(frame: string | EncodedFrame, counted = false): void {
    this.cork();
    if (this.options.counters) this.options.counters.messagesOut++;
    if (typeof frame === 'string' && !counted) countOutput(frame.length);
    // JSON text never contains a raw newline (JSON.stringify escapes them), so a line is a message.
    this.writable.write(
      typeof frame === 'string' ? byteCounted(`${frame}\n`) : frame.wire(ndjsonLine),
    );
    this.afterWrite();
  }

  /** Cork the output for the rest of the task (turn-coalescer), if it is not corked yet. */
  private cork(): void {
    if (this.corked) return;
    this.corked = true;
    this.writable.cork();
    flushAfterTask(this);
  }

  private afterWrite(): void {
    // Large output goes to the kernel at once: bufferedAmount keeps meaning what the peer has
    // not read, for the slow-consumer check, instead of what is being gathered.
    // Many small lines go every MAX_GATHERED_FRAMES, for the peer to start on them.
    if (++this.gathered >= MAX_GATHERED_FRAMES || this.writable.writableLength >= MAX_CORKED_BYTES)
      this.flushWrites();
    this.budget?.report(this, this.budgetBytes);
  }

  /** A socket (TCP) rather than a pair of pipes (stdio). */
  private get sameStream(): boolean {
    return (this.readable as unknown) === (this.writable as unknown);
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    if (this.closed || this.closing) return;
    this.closing = true;
    this.closingWith = [code, reason];
    // What still arrives is read and dropped (reading was paused while output waited, too).
    if (this.cancelResume || this.heldQueued || this.waitingOutput) this.readable.resume();
    this.stopReadPause();
    // What was sent before the close goes before its notice, in its output turns; a shed or a
    // failure drops it.
    if (this.waitingOutput !== undefined && !dropsWaitingOutput(code)) this.closeWaits = true;
    else {
      this.waitingOutput = undefined;
      this.endOutput();
    }
  }

  /** The close's second half, once nothing waits for an output turn: end the output, then the streams. */
  private endOutput(): void {
    const [code, reason] = this.closingWith!;
    // A line left in parts (its output dropped) ends here: the close notice is a line of its own.
    if (this.lineOpen && this.writes) this.writable.write(byteCounted('\n'));
    this.flushWrites();
    // NDJSON has no close frame: the code and reason go as a last line (closeNotice), so the
    // peer tells a revocation, an expiry or a deadline from a dropped connection. Not once the
    // peer has ended its side: it waits for its answers only, and reads no more than those.
    if (!this.inputEnded && !this.writable.writableEnded && !this.writable.destroyed) {
      this.writable.end(byteCounted(`${closeNotice(code, reason)}\n`));
    } else this.writable.end();
    // A peer that never reads, or never finishes its side, must not hold the streams forever:
    // the grace, or what is left until the end-of-input deadline when that is later.
    const grace = this.options.closeGraceMs ?? 2_000;
    const untilDeadline = (this.endOfInputDeadline ?? 0) - Date.now();
    const stop = (): void => {
      this.readable.destroy();
      this.writable.destroy();
      this.finish(code, reason);
    };
    this.closeTimer = setTimeout(stop, Math.max(grace, untilDeadline));
    this.closeTimer.unref();
    // What it queued stays counted in the node's output budget until it is read (a half-closed
    // peer has until the end-of-input deadline): over the budget, it is stopped at once.
    if (this.budget?.closing) this.budget.closing(this, stop);
    else this.budget?.leave(this);
    if (this.sameStream) return; // TCP: complete once the socket has closed both ways
    // stdio: nothing more is read from the pipe; complete once the output has been flushed.
    this.readable.off('data', this.onChunk);
    this.readable.destroy();
    if (this.writable.writableFinished) this.finish(code, reason);
    else this.writable.once('finish', () => this.finish(code, reason));
  }

  /**
   * Call `listener` once everything queued so far has been written (an empty write's callback),
   * what waits for an output turn included.
   */
  onWritten(listener: () => void): void {
    if (this.waitingOutput === undefined) return this.onWrittenNow(listener);
    this.waitOutput(() => {
      this.onWrittenNow(listener);
      return true;
    });
  }

  private onWrittenNow(listener: () => void): void {
    const out = this.writable;
    if (out.writableEnded || out.destroyed) return listener();
    out.write(EMPTY, () => listener());
  }

  /** Call `listener` once the output's buffer has emptied (the corked writes included). */
  onDrain(listener: () => void): () => void {
    return whenDrained(this.writable, () => this.bufferedAmount, 0, listener);
  }

  // A readable someone set an encoding on hands over text: its bytes again (what was not UTF-8
  // has already become U+FFFD there).
  private readonly onChunk = (chunk: Buffer | string): void =>
    this.onData(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);

  private onData(chunk: Buffer): void {
    // Closing or closed: what still arrives is thrown away, not buffered.
    if (this.closing || this.closed) return;
    const lines = this.lines.push(chunk);
    for (const line of lines) {
      if (this.closing || this.closed) return; // a line closed it (too large): drop the rest
      // Paused by an earlier line: the rest of this chunk waits, in order.
      if (this.held !== undefined || this.cancelResume || this.waitingOutput) this.hold(line);
      else if (!this.listener || directDeliveryAllowed()) this.deliver(line);
      else {
        // Past this turn's allowance, all connections together: it waits for a held turn.
        this.hold(line);
        this.deliverHeld();
      }
    }
    if (this.lines.heldBytes > this.options.maxLineBytes) return this.tooLarge();
    // Bytes no line's text stands for (not UTF-8, whitespace) cost the input budget as well.
    const uncounted = this.lines.takeUncounted();
    if (uncounted > 0) this.spendBytes(uncounted);
    // What the chunk left held (an unfinished line, lines waiting) is the node's to bound.
    this.budget?.report(this, this.budgetBytes);
  }

  /** Keep `line` to handle once reading goes on (or the session listens). */
  private hold(line: ByteLine): void {
    (this.held ??= []).push(line);
    if (typeof line === 'string') this.heldChars += line.length;
  }

  /** After a line was handled: stop reading if the peer has fallen too far behind. */
  private checkBackPressure(): void {
    const limit = this.options.maxBufferedBytes ?? 0;
    if (limit <= 0 || this.cancelResume || this.closing || this.closed) return;
    const buffered = this.bufferedAmount;
    this.budget?.report(this, this.budgetBytes);
    if (buffered <= limit) return;
    this.readable.pause();
    this.cancelResume = whenDrained(
      this.writable,
      () => this.bufferedAmount,
      limit / 2,
      () => this.resumeReading(),
    );
  }

  private resumeReading(): void {
    this.cancelResume = undefined;
    if (this.closing || this.closed) return;
    // Still owing the input budget: the wait goes on.
    const owed = this.inputBudget?.spend(0) ?? 0;
    if (owed > 0) return this.pauseFor(owed);
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    this.readOn();
  }

  /** Resume reading unless something still holds it: held lines waiting for their turns, a pause. */
  private readOn(): void {
    if (
      this.heldQueued ||
      this.cancelResume ||
      this.waitingOutput ||
      this.endPending ||
      this.closing ||
      this.closed
    )
      return;
    this.readable.resume();
  }

  /** Closing: held lines are dropped and nothing waits for the output any more. */
  private stopReadPause(): void {
    this.cancelResume?.();
    this.cancelResume = undefined;
    this.held = undefined;
    this.heldFrom = 0;
    this.heldChars = 0;
    // Nor is an unfinished line ever ended: it goes now, not with the transport.
    this.lines.clear();
  }

  /**
   * Have held lines handed over, in order, in the next turns (queueHeld, handHeld), when the
   * session can take them; with none held, end the input if its end waits.
   */
  private deliverHeld(): void {
    if (!this.listener || this.heldQueued || this.closing || this.closed) return;
    if (!this.held) {
      if (!this.cancelResume && this.endPending) this.endOfInput();
      return;
    }
    if (this.cancelResume || this.waitingOutput) return; // reading on hands them over
    // Nothing more is read before they are handed over (readOn): what arrives meanwhile would
    // be held behind them.
    this.readable.pause();
    this.heldQueued = true;
    queueHeld(this);
  }

  /**
   * @internal This connection's turn (queueHeld): hand the session up to `most` held lines in
   * order, stopping early if reading pauses again; queue for the next turn if more are left,
   * else read on. Returns how many it handed over.
   */
  handHeld(most: number): number {
    this.heldQueued = false;
    const held = this.held;
    if (!held || !this.listener) return 0;
    let handed = 0;
    while (
      handed < most &&
      this.heldFrom < held.length &&
      !this.cancelResume &&
      !this.waitingOutput &&
      !heldOutputSpent()
    ) {
      if (this.closing || this.closed) return handed;
      const line = held[this.heldFrom]!;
      held[this.heldFrom++] = '';
      if (typeof line === 'string') this.heldChars -= line.length;
      handed++;
      this.deliver(line);
    }
    if (this.held === held && this.heldFrom >= held.length) {
      this.held = undefined;
      this.heldFrom = 0;
      this.heldChars = 0;
    }
    this.budget?.report(this, this.budgetBytes);
    this.deliverHeld();
    this.readOn();
    return handed;
  }

  private flushPartial(): void {
    const line = this.lines.end();
    if (line !== undefined && !this.closing && !this.closed) this.deliver(line);
  }

  /** A line over the limit: say why on the wire (there is no close code to carry it), then close. */
  private tooLarge(): void {
    if (this.closing) return;
    // Read all the same: charged (at least the limit and a byte, what it took to know), so
    // lines too large, one per connection, cost the address's budget as lines that fit do.
    this.spendBytes(Math.max(this.lines.heldBytes, this.options.maxLineBytes + 1));
    this.lines.clear();
    this.send(
      `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Message too large","data":{"maxMessageBytes":${this.options.maxLineBytes}}},"id":null}`,
    );
    this.close(CloseCode.MessageTooBig, 'message too large');
  }

  private deliver(line: ByteLine): void {
    if (line === TOO_LARGE) return this.tooLarge();
    if (!this.listener) {
      this.hold(line);
      return;
    }
    if (this.options.counters) this.options.counters.messagesIn++;
    // Answered here: the peer is handed text, and these bytes are none.
    if (line === NOT_UTF8) {
      this.admit?.take();
      this.send(INVALID_UTF8_REPLY);
    } else this.listener.receive(line);
    this.spendInput(line);
    this.checkBackPressure();
  }

  /** Count `line` against the input budget; past it, stop reading until it has refilled. */
  private spendInput(line: ByteLine): void {
    // A line not UTF-8 has its bytes charged as uncounted (onData): here, the floor.
    const bytes = typeof line === 'string' ? Buffer.byteLength(line) : 0;
    this.spendBytes(Math.max(bytes, this.options.messageCostBytes ?? 0));
  }

  /**
   * Count `bytes` more against the input budget: work a line asked of the gateway beyond
   * reading it (Transport.chargeBytes). Past the budget, reading stops until it has refilled.
   */
  chargeBytes(bytes: number): void {
    if (bytes > 0) this.spendBytes(bytes);
  }

  /** Count `bytes` read against the input budget; past it, stop reading until it has refilled. */
  private spendBytes(bytes: number): void {
    const limit = this.options.inputLimit;
    if (!limit || this.closing || this.closed) return;
    const budget = (this.inputBudget ??= limit.budget(this));
    const wait = budget.spend(bytes);
    // Paused already (the output): the debt is looked at again before reading goes on.
    if (wait > 0 && !this.cancelResume) this.pauseFor(wait);
  }

  /**
   * @internal InputReader: another connection put the budget this one shares (its address
   * group's) in debt. Stop reading until it has refilled (a pause under way goes on).
   */
  sharedBudgetInDebt(): void {
    this.spendBytes(0);
  }

  /** Stop reading for `ms`, then read on as after the output drained (resumeReading). */
  private pauseFor(ms: number): void {
    this.readable.pause();
    const timer = setTimeout(() => this.resumeReading(), ms);
    timer.unref?.();
    this.cancelResume = () => clearTimeout(timer);
  }

  private finish(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.waitingOutput = undefined; // dropped, as the stream's buffer
    // A close this transport was asked for completes with the code it was given.
    if (this.closingWith) [code, reason] = this.closingWith;
    this.budget?.leave(this);
    this.inputBudget?.close?.();
    this.options.inputLimit?.release?.();
    clearTimeout(this.closeTimer);
    this.stopReadPause();
    this.readable.off('data', this.onChunk);
    // A pipe (stdio) has no other end to wait for: stop reading it so nothing more is held.
    if (!this.sameStream) this.readable.destroy();
    this.listener?.transportClosed(code, reason);
  }
}
