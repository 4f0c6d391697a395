import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { CloseCode } from './transport.js';
import { byteCounted } from './byte-counted.js';
import {
  countOutput,
  dropsWaitingOutput,
  outputSpent,
  keepWaiting,
  takePieces,
  writeWaitingFrames,
  type Pieces,
  type WaitingFrame,
  type WaitingOutput,
} from './input-turns.js';
import type { EncodedFrame, PieceSource, ServerTransport, TransportListener } from './transport.js';
import type { BudgetLedger, BudgetMember } from './output-budget.js';
import { whenDrained } from './when-drained.js';

/** The bounds of one HTTP streaming session (GatewayLimits' sse* limits and maxBufferedBytes). */
export interface SseLimits {
  /**
   * Bytes of sent events kept for a resume by Last-Event-ID: each its text's (keptTextBytes) and
   * KEPT_EVENT_BYTES.
   */
  replayBytes: number;
  /** How long a sent event is kept for a resume. */
  replayMs: number;
  /** How long the session waits for a dropped stream to come back before it closes. */
  graceMs: number;
  /** Bytes queued on the stream beyond which the session is closed (1008); 0: never. */
  maxBufferedBytes: number;
  /** A comment line this often keeps proxies from timing the stream out. */
  heartbeatMs: number;
}

/**
 * What keeping one sent event costs beyond its text's bytes (its record, its string's header,
 * its place in the list), counted against `replayBytes` with them: counted by text alone, a
 * buffer of tiny events (a flood of rpc.ping answers, about 200 bytes of heap for 43 of text)
 * would hold four to five times its bound.
 */
export const KEPT_EVENT_BYTES = 176;

/**
 * How long a stream may hold more than maxBufferedBytes with nothing of it leaving before its
 * session is closed as not reading (1008): a reader behind a slow link drains some in that time.
 */
export const STALL_LOOK_MS = 5_000;

/** Past this many times maxBufferedBytes held by a stream, its session is closed (1008) at once. */
export const STALL_FACTOR = 16;

/** A character V8 cannot hold in a one-byte string. */
const PAST_LATIN1 = /[\u0100-\uffff]/;

/**
 * What a kept text costs the heap, as `replayBytes` counts it: its UTF-8 bytes, or two a
 * character when it has a character past U+00FF, for which V8 holds the whole string at two
 * bytes a character (ASCII text with one '€' takes twice its UTF-8 bytes).
 */
function keptTextBytes(text: string): number {
  const bytes = Buffer.byteLength(text);
  if (bytes === text.length || !PAST_LATIN1.test(text)) return bytes;
  return Math.max(bytes, 2 * text.length);
}

interface SentEvent {
  readonly id: number;
  readonly text: string;
  readonly at: number;
  readonly bytes: number;
}

/** The head of every stream a session is sent on. */
const STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  // nginx passes the stream on as it comes with this, whatever its proxy_buffering.
  'x-accel-buffering': 'no',
} as const;

/** One SSE event: its `id:` line, then the text's lines each as a `data:` line. */
function eventText(id: number | undefined, text: string, event?: string): string {
  const head = (event ? `event: ${event}\n` : '') + (id === undefined ? '' : `id: ${id}\n`);
  return `${head}data: ${dataLines(text)}\n\n`;
}

/** Text as the lines of an event's data: each line after the first a `data:` line of its own. */
function dataLines(text: string): string {
  return text.split('\n').join('\ndata: ');
}

/**
 * An event being sent in parts (sendPieces): its id, its parts made so far and their characters
 * (held until it is whole, and kept for a resume then), and the stream its first part went to
 * (undefined: none was attached), where its `data:` line stays open until its last part.
 */
interface EventInParts {
  readonly id: number;
  readonly parts: string[];
  chars: number;
  readonly stream: ServerResponse | undefined;
}

/**
 * Cut a stream's connection: destroyed with a TCP reset (SO_LINGER 0), so that what the kernel
 * still holds unsent for it goes too. A plain close would leave that to the kernel, which sends
 * it on for as long as the peer keeps its window shut, outside every bound of the gateway. A TLS
 * socket is reset through the TCP socket under it (a TLS stream has no reset of its own).
 */
function cut(stream: ServerResponse): void {
  const socket = stream.socket ?? stream.req.socket;
  resetSocket(socket);
  stream.destroy();
}

function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    // ERR_INVALID_HANDLE_TYPE: a TLS socket, whose TCP socket is its `_parent`.
    const tcp = (socket as { _parent?: Socket })._parent;
    if (tcp && !tcp.destroyed) resetSocket(tcp);
    socket.destroy();
  }
}

function frameText(frame: string | EncodedFrame): string {
  if (typeof frame === 'string') return frame;
  const { bytes } = frame;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

/**
 * How long after its stream dropped a session is taken to hold what its client has not read
 * (holdsUndelivered): a drain waits that long at most for the resume.
 */
export const RESUME_AWAITED_MS = 5_000;

/**
 * A session over HTTP streaming: what the server sends goes out as Server-Sent Events on the
 * session's current GET stream (one event per JSON-RPC message or batch, `id:` counting the
 * session's events from 1), what the client sends comes in by POST (`receive`). The stream
 * may drop and come back (`attach` with the last id the client saw): the events it missed are
 * sent again from a replay buffer bounded in bytes and age; a resume from before what the
 * buffer still holds closes the session (1008) rather than go on with a gap. A session whose
 * stream stays away for `graceMs` is closed (1001); one whose stream holds more than
 * `maxBufferedBytes` with nothing of it leaving for STALL_LOOK_MS, or more than STALL_FACTOR
 * times it, is closed (1008).
 *
 * A session holds at most one stream: a stream that stops being the session's is cut (`cut`)
 * rather than ended, unless it can end at once. Once replaced or closed, its socket has left
 * the HTTP socket bounds (the stream was handed over), the output budget and the session's
 * buffer bound, and no timer watches it: ended politely, a stream its peer does not read would
 * hold its queue, its socket and the kernel's send buffer for as long as the peer stays.
 */
export class SseTransport implements ServerTransport, BudgetMember {
  readonly kind = 'sse' as const;
  readonly canPush = true;
  private listener: TransportListener | undefined;
  private stream: ServerResponse | undefined;
  /** Told once a stream is attached again, or the session closes (onStreamBack). */
  private readonly streamWaiters = new Set<() => void>();
  /** Kept events from `sentFrom` on; the slots before it are emptied, waiting to be compacted. */
  private readonly sent: (SentEvent | undefined)[] = [];
  private sentFrom = 0;
  private sentBytes = 0;
  private nextId = 1;
  private closed = false;
  private graceTimer: ReturnType<typeof setTimeout> | undefined;
  /** When the session's stream last went (or, before its first, when the session opened). */
  private awaySince = 0;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** Bytes handed to the current stream: with what it still holds, what has left it. */
  private streamBytes = 0;
  /** The next look at a stream holding more than maxBufferedBytes (notReading). */
  private stallTimer: ReturnType<typeof setTimeout> | undefined;
  /** The node-wide output budget (maxBufferedBytesTotal) this transport reports to. */
  private budget: BudgetLedger | undefined;
  /** BudgetMember: what this transport last reported to its budget. */
  budgeted = 0;
  /** Bytes read so far of the POST body being read (bodyReading). */
  private bodyBytes = 0;
  /**
   * Events sent once the turn's output was spent (outputSpent), and every event sent after them,
   * in order, for output turns (queueOutput); a function stands for an event made as it is
   * written. Undefined while none waits.
   */
  private waitingOutput: WaitingOutput | undefined;
  /** A close asked for while output waited: made once that output is written. */
  private closeAfterOutput: { code: number; reason: string } | undefined;
  /**
   * The event being sent in parts, if one is: at most one, since everything sent after it waits
   * behind it. It has its id, and is not kept yet.
   */
  private inParts: EventInParts | undefined;
  /** Told once no output waits, or the session closes (outputWritten). */
  private outputWaiters: (() => void)[] = [];
  /** The code the session closed with. */
  private closedWith: number | undefined;
  private closedBecause = '';
  /**
   * The session's rate limit (limits.ratePerSecond), set by its owner once the session is open:
   * what `refuse` takes a token of. Undefined: no limit.
   */
  admit: { take(): boolean } | undefined = undefined;
  /**
   * Spends from the input budget of the session's address (limits.bytesPerSecondPerIp), set by
   * its owner with `admit`: what chargeMessages and chargeBytes cost, paid by the waits of the
   * address's next POSTs. Undefined: no budget.
   */
  charge: ((bytes: number) => void) | undefined = undefined;
  /** limits.messageCostBytes, set with `charge`: what each batch member after the first costs. */
  messageCostBytes = 0;
  /**
   * How often its client said it will be heard from (the opening GET's keepalive header), told
   * to it in each session event; 0: it did not say. The heartbeat gives up a session that said
   * and then was not heard from at three visits in a row (see Heartbeat).
   */
  keepaliveMs = 0;
  /** Its client was heard from (a request naming the session) since the heartbeat last looked. */
  heard = true;
  /** Heartbeat visits in a row its client was not heard from at. */
  unheardVisits = 0;

  constructor(
    /** The session's id and secret, told to the client in each stream's first event. */
    readonly sessionId: string,
    readonly secret: string,
    private readonly limits: SseLimits,
    private readonly counters: { messagesIn: number; messagesOut: number },
    /** Told once the transport has closed (the endpoint forgets the session). */
    private readonly onClosed: (transport: SseTransport) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.waitForStream();
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
  }

  /** Transport.chargeMessages: a batch's members after the first, as a WebSocket's cost. */
  chargeMessages(count: number): void {
    this.charge?.(count * this.messageCostBytes);
  }

  /** Transport.chargeBytes: work a message asked for (params validation) as bytes read. */
  chargeBytes(bytes: number): void {
    this.charge?.(bytes);
  }

  /** Report to the node-wide output budget from now on (GatewayLimits.maxBufferedBytesTotal). */
  joinBudget(budget: BudgetLedger): void {
    this.budget = budget;
  }

  /**
   * BudgetMember: bytes queued on the stream and the replay buffer's, or 0 once closed. The
   * replay buffer counts: each session may keep sseReplayBytes of it, stream or no stream, and
   * maxConnections sessions' worth (10 GiB by default) is more than the process can hold.
   */
  get budgetBytes(): number {
    return this.closed ? 0 : this.bufferedAmount + this.replayKeptBytes + this.bodyBytes;
  }

  /**
   * The bytes read so far of the session's POST body being read (0: none is), told by the
   * endpoint as they come. They count toward the node's total: a session's POSTs are read one at
   * a time, but each may be maxMessageBytes, and every session may have one arriving slowly.
   */
  bodyReading(bytes: number): void {
    if (this.closed) return;
    this.bodyBytes = bytes;
    this.budget?.report(this, this.budgetBytes);
  }

  /** The code the session closed with (undefined while open): its POST being read is answered by it. */
  get closeCode(): number | undefined {
    return this.closedWith;
  }

  /** What the replay buffer keeps, as sseReplayBytes counts it (0 once closed). */
  get replayKeptBytes(): number {
    return this.sentBytes;
  }

  /**
   * Whether the session has closed, or is closing once its waiting output is written: a stream
   * or POST for it gets 404.
   */
  get isClosed(): boolean {
    return this.closed || this.closeAfterOutput !== undefined;
  }

  /**
   * Resolves once none of the session's output waits for an output turn, or it closed: the
   * endpoint reads no POST for it before, as a connection whose output waits is not read, so
   * that what waits is bounded by the calls running and what they are sent.
   */
  outputWritten(): Promise<void> {
    if (this.waitingOutput === undefined || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.outputWaiters.push(resolve));
  }

  private tellOutputWritten(): void {
    const waiters = this.outputWaiters;
    this.outputWaiters = [];
    for (const waiter of waiters) waiter();
  }

  /**
   * The id of the last event sent (0: none yet). An event being written in parts is not sent
   * yet: it is the last to have an id, and a client has it only once it is whole.
   */
  get lastEventId(): number {
    return this.nextId - 1 - (this.inParts ? 1 : 0);
  }

  /**
   * Make `res` the session's stream, and send the events after `lastEventId` again (undefined:
   * 0, every event still held: a client whose stream dropped before it saw an event with an id
   * has seen none). Returns false, having closed the session, when some of those events are no
   * longer held. The stream before, if any, is cut: the client reads this one from now on, and
   * what it missed on the other comes again from the replay buffer.
   */
  attach(res: ServerResponse, lastEventId: number | undefined): boolean {
    if (this.closed) {
      // Closed before its stream came (by an observer of `connected$`, on the session's opening
      // GET): the stream is just the close event, as it would have ended with one.
      res.writeHead(200, STREAM_HEADERS);
      const close = JSON.stringify({ code: this.closedWith, reason: this.closedBecause });
      res.end(eventText(undefined, close, 'close'));
      return false;
    }
    const previous = this.stream;
    this.stream = undefined;
    if (previous) {
      this.budget?.report(this, this.budgetBytes);
      cut(previous);
    }
    clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    res.writeHead(200, STREAM_HEADERS);
    // A response queued behind another on a pipelined connection has no socket yet, and gets
    // no 'close' if the connection dies first: its socket's close is heard too.
    const socket = res.req.socket;
    const gone = (): void => this.streamClosed(res);
    socket.once('close', gone);
    res.once('close', () => {
      socket.off('close', gone);
      gone();
    });
    this.stream = res;
    this.streamBytes = 0;
    // A look at the stream before this one: this one is looked at from its own first overflow.
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    const seen = lastEventId ?? 0;
    // Where this stream's events follow on: a client reading from here has every event after
    // it, the ones sent before the stream came (replayed below) included.
    const hello = JSON.stringify({
      session: this.sessionId,
      secret: this.secret,
      lastEventId: seen,
      ...(this.keepaliveMs > 0 ? { keepaliveMs: this.keepaliveMs } : {}),
    });
    res.write(eventText(undefined, hello, 'session'));
    if (seen < this.lastEventId) {
      this.pruneOld();
      const first = this.sent[this.sentFrom];
      if (seen < 0 || first === undefined || first.id > seen + 1) {
        this.closeNow(CloseCode.PolicyViolation, 'events after Last-Event-ID are no longer held');
        return false;
      }
      for (let i = this.sentFrom; i < this.sent.length; i++) {
        const event = this.sent[i]!;
        if (event.id > seen) this.write(eventText(event.id, event.text));
      }
    }
    // The replay's writes may have closed the session (its stream over the bound): no timer then.
    if (this.closed) return false;
    clearInterval(this.heartbeatTimer);
    // Written as events are (`write`): held to the stream's bound, counted in its output budget
    // and its stall look, so a reader that never reads cannot have comments queued without end.
    this.heartbeatTimer = setInterval(() => {
      // Not inside an event written in parts: the comment would end up in its data.
      if (this.inParts?.stream !== this.stream) this.write(': heartbeat\n\n');
    }, this.limits.heartbeatMs);
    this.heartbeatTimer.unref();
    this.tellStreamBack();
    return true;
  }

  /** Whether the session has a stream now (between a drop and its resume, it has none). */
  get streaming(): boolean {
    return this.stream !== undefined;
  }

  /**
   * Call `listener` once a stream is attached again (a resume), or once the session closes;
   * returns a function that cancels it. What waits for the client's next stream waits here,
   * not on `onDrain`, which has nothing to wait for without one.
   */
  onStreamBack(listener: () => void): () => void {
    if (this.closed || this.stream) {
      const timer = setTimeout(listener, 0);
      return () => clearTimeout(timer);
    }
    this.streamWaiters.add(listener);
    return () => this.streamWaiters.delete(listener);
  }

  private tellStreamBack(): void {
    const waiters = [...this.streamWaiters];
    this.streamWaiters.clear();
    for (const waiter of waiters) waiter();
  }

  /** One message (or batch) the client POSTed. */
  receive(text: string): void {
    if (this.isClosed || !this.listener) return;
    this.counters.messagesIn++;
    this.listener.receive(text);
  }

  /**
   * One message the client POSTed that is no message for the session (its bytes are not
   * UTF-8), answered `reply` here: counted, and charged a token of the session's rate limit
   * (`admit`), as a message the session answers is. Free, it would let a client send without end
   * while its calls are rate limited.
   */
  refuse(reply: string): void {
    if (this.closed) return;
    this.counters.messagesIn++;
    this.admit?.take();
    this.send(reply);
  }

  /**
   * Send one event: written now, or, once the text the sessions sent in this turn has reached
   * OUTPUT_CHARS_PER_TURN, in a later turn (queueOutput), the session's events after it behind
   * it, in order.
   */
  send(frame: string | EncodedFrame): void {
    if (this.isClosed) return;
    if (this.waitingOutput !== undefined || (typeof frame === 'string' && outputSpent()))
      return this.waitOutput(frame);
    this.sendEvent(frame);
  }

  /** One event, kept for a resume and written; `counted`: its text is counted already. */
  private sendEvent(frame: string | EncodedFrame, counted = false): void {
    this.counters.messagesOut++;
    const text = frameText(frame);
    // A publish's frame, shared by its subscribers, is not the session's output.
    if (typeof frame === 'string' && !counted) countOutput(text.length);
    const id = this.nextId++;
    this.remember({ id, text, at: this.now(), bytes: keptTextBytes(text) + KEPT_EVENT_BYTES });
    this.write(eventText(id, text));
  }

  outputWaits(): boolean {
    return this.waitingOutput !== undefined || outputSpent();
  }

  chargeOutput(chars: number): void {
    countOutput(chars);
  }

  /** Transport.sendMade: `make`'s text is made as it is written, in its output turn if it waits. */
  sendMade(make: () => string | undefined, written?: () => void): void {
    if (this.isClosed) return;
    if (this.waitingOutput !== undefined || outputSpent())
      this.waitOutput(() => this.writeMade(make, written));
    else this.writeMade(make, written);
  }

  private writeMade(make: () => string | undefined, written: (() => void) | undefined): true {
    const text = make();
    if (text !== undefined && !this.closed) this.sendEvent(text);
    written?.();
    return true;
  }

  /**
   * Transport.sendPieces: pieces made as the turn allows, the event written in parts past it
   * (its `data:` line left open until its last part, no heartbeat in between).
   */
  sendPieces(source: PieceSource, written?: () => void): void {
    if (this.isClosed) return;
    const pieces: Pieces = { source, written, started: false };
    if (this.waitingOutput !== undefined || !this.writePieces(pieces)) {
      this.waitOutput(() => this.writePieces(pieces));
    }
  }

  /**
   * Make and write the event's pieces while the turn's output allows: all of them, unless it
   * began already, as one event; else what this turn made as the event's next part. A part goes
   * only to the stream the event began on: when the stream changed meanwhile, the whole event
   * goes to the new one with its last part (a client never dispatches an event it did not get
   * to its end, and the replay is of whole events). Returns whether the event is complete.
   */
  private writePieces(pieces: Pieces): boolean {
    const taken = takePieces(pieces);
    if (taken === undefined) return false;
    if (this.closed) return true; // nothing more is made
    const stream = this.stream;
    let event = this.inParts;
    if (event === undefined) {
      if (taken.done) {
        this.sendEvent(taken.text, true);
        pieces.written?.();
        return true;
      }
      pieces.started = true;
      this.counters.messagesOut++;
      event = this.inParts = { id: this.nextId++, parts: [], chars: 0, stream };
      if (stream) this.write(`id: ${event.id}\ndata: ${dataLines(taken.text)}`);
    } else if (stream && stream === event.stream) this.write(dataLines(taken.text));
    event.parts.push(taken.text);
    event.chars += taken.text.length;
    if (!taken.done) {
      this.budget?.report(this, this.budgetBytes);
      return false;
    }
    this.inParts = undefined;
    const text = event.parts.join('');
    this.remember({
      id: event.id,
      text,
      at: this.now(),
      bytes: keptTextBytes(text) + KEPT_EVENT_BYTES,
    });
    if (stream && stream === event.stream) this.write('\n\n');
    else if (stream) this.write(eventText(event.id, text));
    pieces.written?.();
    return true;
  }

  /**
   * Keep `frame` for an output turn, behind what waits already; a function is called in its
   * place (an event made as it is written, an onWritten wait).
   */
  private waitOutput(frame: WaitingFrame): void {
    this.waitingOutput = keepWaiting(this.waitingOutput, frame, this);
    this.budget?.report(this, this.budgetBytes);
  }

  /**
   * @internal This session's part of an output turn (writeOutputTurn): write what waits, in
   * order, while the turn's output allows; then close if a close waits for it. Returns whether
   * nothing is left.
   */
  writeWaiting(): boolean {
    const waiting = this.waitingOutput;
    if (waiting === undefined) return true;
    try {
      const open = () => !this.closed;
      const write = (frame: string | EncodedFrame): void => {
        if (!this.closed) this.sendEvent(frame);
      };
      if (!writeWaitingFrames(waiting, open, write)) return false;
    } catch {
      // Nothing here throws (the events are made by code that does not): should it, the session
      // closes rather than wait for ever, and the turn goes on with the others.
      this.waitingOutput = undefined;
      this.closeNow(CloseCode.InternalError, 'output failed');
      return true;
    }
    this.waitingOutput = undefined;
    const close = this.closeAfterOutput;
    if (close !== undefined) this.closeNow(close.code, close.reason);
    else this.budget?.report(this, this.budgetBytes);
    this.tellOutputWritten();
    return true;
  }

  /**
   * Bytes queued on the stream, and the characters of the events waiting for an output turn and
   * of the parts made of an event sent in parts.
   */
  get bufferedAmount(): number {
    const waiting = (this.waitingOutput?.chars ?? 0) + (this.inParts?.chars ?? 0);
    return (this.stream?.writableLength ?? 0) + waiting;
  }

  /**
   * Whether what was sent may not have reached the client: the stream holds bytes, or it dropped
   * less than RESUME_AWAITED_MS ago (the events since wait in the replay buffer for its resume,
   * which a client that is still there makes within a few seconds; one that went for good is
   * not waited for to the end of sseGraceMs).
   */
  get holdsUndelivered(): boolean {
    if (this.stream !== undefined) return this.bufferedAmount > 0;
    return this.now() - this.awaySince < RESUME_AWAITED_MS;
  }

  /**
   * Close the session: its stream ends with the close event, or is cut when the event cannot
   * go out at once (see `endStream`).
   */
  close(code: number = CloseCode.Normal, reason = ''): void {
    if (this.closed) return;
    // After what waits, as a connection's close goes (the first asked for); a shed or a failure,
    // even while another close waits, drops it.
    if (this.waitingOutput !== undefined && !dropsWaitingOutput(code)) {
      this.closeAfterOutput ??= { code, reason };
      return;
    }
    this.closeNow(code, reason);
  }

  /** Close at once, dropping what waits for an output turn. */
  private closeNow(code: number, reason: string): void {
    this.closeWith(code, reason, (stream) => this.endStream(stream, code, reason));
  }

  /**
   * The client ended the session (DELETE): closed (1000), its stream cut whatever it holds. The
   * client reads no more of it, and an end would leave what the kernel holds for it to a
   * closed socket's send queue.
   */
  closeByClient(): void {
    this.closeWith(CloseCode.Normal, 'client closed', cut);
  }

  private closeWith(code: number, reason: string, stop: (stream: ServerResponse) => void): void {
    if (this.closed) return;
    this.closed = true;
    this.closedWith = code;
    this.closedBecause = reason;
    this.bodyBytes = 0;
    this.waitingOutput = undefined;
    this.tellOutputWritten();
    this.budget?.leave(this);
    clearTimeout(this.graceTimer);
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.stallTimer);
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !stream.destroyed) stop(stream);
    // After the stop: an event left open on the stream has it cut rather than ended (endStream).
    this.inParts = undefined;
    this.sent.length = 0;
    this.sentBytes = 0;
    this.onClosed(this);
    this.tellStreamBack();
    // As a socket's close event would: after the caller's turn.
    setImmediate(() => this.listener?.transportClosed(code, reason));
  }

  onDrain(listener: () => void): () => void {
    const stream = this.stream;
    if (!stream) {
      const timer = setTimeout(listener, 0);
      return () => clearTimeout(timer);
    }
    return whenDrained(stream, () => this.bufferedAmount, 0, listener);
  }

  onWritten(listener: () => void): void {
    // Once what waits for an output turn is written, and then what the stream holds.
    if (this.waitingOutput !== undefined) {
      return this.waitOutput(() => {
        this.onStreamWritten(listener);
        return true;
      });
    }
    this.onStreamWritten(listener);
  }

  private onStreamWritten(listener: () => void): void {
    const stream = this.stream;
    if (!stream || stream.writableEnded || stream.destroyed) return listener();
    stream.write('', () => listener());
  }

  /**
   * End a stream that is no longer the session's with its close event, when that can go: a
   * stream over its bound is cut at once, and one whose socket still holds something unsent at
   * the end of the turn (what this turn wrote has been handed to the kernel by then: the
   * response corks its socket until the next tick) is cut then. Such a peer is not reading, or
   * is far behind; waiting for it would keep its socket and queue, outside every bound, for as
   * long as it likes. A client that did not get the close event learns of it on its resume:
   * 404, the session is gone.
   */
  private endStream(stream: ServerResponse, code: number, reason: string): void {
    // An event left open (its last part unwritten) would take the close event into its data.
    if (this.overBuffer(stream) || this.inParts?.stream === stream) return cut(stream);
    const socket = stream.socket;
    stream.end(eventText(undefined, JSON.stringify({ code, reason }), 'close'));
    if (!socket) return;
    setImmediate(() => {
      if (!socket.destroyed && socket.writableLength > 0) resetSocket(socket);
    });
  }

  private write(chunk: string): void {
    const stream = this.stream;
    if (!stream || stream.destroyed) return;
    // Counted in bytes (byteCounted): the stall look sets the bytes handed over against
    // writableLength, and would take each write of text counted in characters for bytes leaving
    // (a client that never reads kept until 16 times the bound).
    const bytes = Buffer.byteLength(chunk);
    stream.write(byteCounted(chunk, bytes));
    this.streamBytes += bytes;
    const limit = this.limits.maxBufferedBytes;
    if (limit > 0 && stream.writableLength > limit * STALL_FACTOR) {
      this.closeNow(CloseCode.PolicyViolation, 'not reading');
      return;
    }
    this.budget?.report(this, this.budgetBytes);
    if (this.overBuffer(stream) && this.stallTimer === undefined) this.lookAgain(stream);
  }

  /**
   * The stream holds more than maxBufferedBytes: looked at again after STALL_LOOK_MS, and the
   * session closed (1008) if it still does and nothing of it has left since. A large reply, or a
   * burst, to a client that reads goes out; one that does not read is closed within that time,
   * or at once past STALL_FACTOR times the bound.
   */
  private lookAgain(stream: ServerResponse): void {
    const left = this.streamBytes - stream.writableLength;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      if (this.stream !== stream || this.closed || !this.overBuffer(stream)) return;
      // What a write adds beyond its text (the chunk's framing) is not counted in streamBytes,
      // so writes alone make this go down: only a rise is something leaving.
      if (this.streamBytes - stream.writableLength <= left) {
        this.closeNow(CloseCode.PolicyViolation, 'not reading');
      } else this.lookAgain(stream);
    }, STALL_LOOK_MS);
    this.stallTimer.unref();
  }

  private overBuffer(stream: ServerResponse): boolean {
    const limit = this.limits.maxBufferedBytes;
    return limit > 0 && stream.writableLength > limit;
  }

  private remember(event: SentEvent): void {
    this.sent.push(event);
    this.sentBytes += event.bytes;
    this.pruneOld();
    // Kept with or without a stream: told now, not only with the next write to one.
    this.budget?.report(this, this.budgetBytes);
  }

  /** Drop the oldest events past the replay buffer's bytes or age. */
  private pruneOld(): void {
    const { replayBytes, replayMs } = this.limits;
    const oldest = this.now() - replayMs;
    while (this.sentFrom < this.sent.length) {
      const event = this.sent[this.sentFrom]!;
      if (this.sentBytes <= replayBytes && event.at >= oldest) break;
      this.sentBytes -= event.bytes;
      // Let go at once: a slot kept until the compaction below would keep its text alive, up
      // to 64 events past the bound (64 MiB for replies of nearly sseReplayBytes each).
      this.sent[this.sentFrom++] = undefined;
    }
    // Compact once half the array is gone: amortised O(1) per event.
    if (this.sentFrom > 64 && this.sentFrom * 2 > this.sent.length) {
      this.sent.splice(0, this.sentFrom);
      this.sentFrom = 0;
    }
  }

  private streamClosed(res: ServerResponse): void {
    if (this.stream !== res) return;
    this.stream = undefined;
    clearInterval(this.heartbeatTimer);
    if (!this.closed) this.waitForStream();
  }

  private waitForStream(): void {
    this.awaySince = this.now();
    this.graceTimer = setTimeout(
      () => this.closeNow(CloseCode.GoingAway, 'event stream gone'),
      this.limits.graceMs,
    );
    this.graceTimer.unref();
  }
}
