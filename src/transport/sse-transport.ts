import type { ServerResponse } from 'node:http';
import { CloseCode } from './transport.js';
import type { EncodedFrame, ServerTransport, TransportListener } from './transport.js';
import type { BudgetLedger, BudgetMember } from './output-budget.js';
import { whenDrained } from './when-drained.js';

/** The bounds of one HTTP streaming session (GatewayLimits' sse* limits and maxBufferedBytes). */
export interface SseLimits {
  /** Bytes of sent events kept for a resume by Last-Event-ID. */
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

interface SentEvent {
  readonly id: number;
  readonly text: string;
  readonly at: number;
  readonly bytes: number;
}

/** One SSE event: its `id:` line, then the text's lines each as a `data:` line. */
function eventText(id: number | undefined, text: string, event?: string): string {
  const head = (event ? `event: ${event}\n` : '') + (id === undefined ? '' : `id: ${id}\n`);
  return `${head}data: ${text.split('\n').join('\ndata: ')}\n\n`;
}

function frameText(frame: string | EncodedFrame): string {
  if (typeof frame === 'string') return frame;
  const { bytes } = frame;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

/**
 * A session over HTTP streaming: what the server sends goes out as Server-Sent Events on the
 * session's current GET stream (one event per JSON-RPC message or batch, `id:` counting the
 * session's events from 1), what the client sends comes in by POST (`receive`). The stream
 * may drop and come back (`attach` with the last id the client saw): the events it missed are
 * sent again from a replay buffer bounded in bytes and age; a resume from before what the
 * buffer still holds closes the session (1008) rather than go on with a gap. A session whose
 * stream stays away for `graceMs` is closed (1001); one whose stream holds more than
 * `maxBufferedBytes` unread is closed (1008), its stream ended.
 */
export class SseTransport implements ServerTransport, BudgetMember {
  readonly kind = 'sse' as const;
  readonly canPush = true;
  private listener: TransportListener | undefined;
  private stream: ServerResponse | undefined;
  private readonly sent: SentEvent[] = [];
  private sentFrom = 0;
  private sentBytes = 0;
  private nextId = 1;
  private closed = false;
  private graceTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  /** The node-wide output budget (maxBufferedBytesTotal) this transport reports to. */
  private budget: BudgetLedger | undefined;
  /** BudgetMember: what this transport last reported to its budget. */
  budgeted = 0;

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

  /** Report to the node-wide output budget from now on (GatewayLimits.maxBufferedBytesTotal). */
  joinBudget(budget: BudgetLedger): void {
    this.budget = budget;
  }

  /** BudgetMember: bytes queued on the stream, or 0 once closed. */
  get budgetBytes(): number {
    return this.closed ? 0 : this.bufferedAmount;
  }

  /** Whether the session has closed: a stream or POST for it gets 404. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The id of the last event sent (0: none yet). */
  get lastEventId(): number {
    return this.nextId - 1;
  }

  /**
   * Make `res` the session's stream (ending the one before, if any), and send the events after
   * `lastEventId` again. Returns false, having closed the session, when some of those events
   * are no longer held.
   */
  attach(res: ServerResponse, lastEventId: number | undefined): boolean {
    if (this.closed) return false;
    const previous = this.stream;
    this.stream = undefined;
    previous?.end();
    clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      // nginx passes the stream on as it comes with this, whatever its proxy_buffering.
      'x-accel-buffering': 'no',
    });
    res.on('close', () => this.streamClosed(res));
    this.stream = res;
    const hello = JSON.stringify({
      session: this.sessionId,
      secret: this.secret,
      lastEventId: this.lastEventId,
    });
    res.write(eventText(undefined, hello, 'session'));
    if (lastEventId !== undefined && lastEventId < this.lastEventId) {
      this.pruneOld();
      const first = this.sent[this.sentFrom];
      if (lastEventId < 0 || first === undefined || first.id > lastEventId + 1) {
        this.close(CloseCode.PolicyViolation, 'events after Last-Event-ID are no longer held');
        return false;
      }
      for (let i = this.sentFrom; i < this.sent.length; i++) {
        const event = this.sent[i]!;
        if (event.id > lastEventId) this.write(eventText(event.id, event.text));
      }
    }
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(
      () => this.stream?.write(': heartbeat\n\n'),
      this.limits.heartbeatMs,
    );
    this.heartbeatTimer.unref();
    return true;
  }

  /** One message (or batch) the client POSTed. */
  receive(text: string): void {
    if (this.closed || !this.listener) return;
    this.counters.messagesIn++;
    this.listener.receive(text);
  }

  send(frame: string | EncodedFrame): void {
    if (this.closed) return;
    this.counters.messagesOut++;
    const text = frameText(frame);
    const id = this.nextId++;
    this.remember({ id, text, at: this.now(), bytes: Buffer.byteLength(text) });
    this.write(eventText(id, text));
  }

  get bufferedAmount(): number {
    return this.stream?.writableLength ?? 0;
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    if (this.closed) return;
    this.closed = true;
    this.budget?.leave(this);
    clearTimeout(this.graceTimer);
    clearInterval(this.heartbeatTimer);
    const stream = this.stream;
    this.stream = undefined;
    if (stream && !stream.destroyed) {
      // A stream over its bound is not read: cut it rather than queue more.
      if (code === CloseCode.PolicyViolation && this.overBuffer(stream)) stream.destroy();
      else stream.end(eventText(undefined, JSON.stringify({ code, reason }), 'close'));
    }
    this.sent.length = 0;
    this.sentBytes = 0;
    this.onClosed(this);
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
    const stream = this.stream;
    if (!stream || stream.writableEnded || stream.destroyed) return listener();
    stream.write('', () => listener());
  }

  private write(chunk: string): void {
    const stream = this.stream;
    if (!stream || stream.destroyed) return;
    stream.write(chunk);
    if (this.overBuffer(stream)) this.close(CloseCode.PolicyViolation, 'not reading');
    else this.budget?.report(this, this.bufferedAmount);
  }

  private overBuffer(stream: ServerResponse): boolean {
    const limit = this.limits.maxBufferedBytes;
    return limit > 0 && stream.writableLength > limit;
  }

  private remember(event: SentEvent): void {
    this.sent.push(event);
    this.sentBytes += event.bytes;
    this.pruneOld();
  }

  /** Drop the oldest events past the replay buffer's bytes or age. */
  private pruneOld(): void {
    const { replayBytes, replayMs } = this.limits;
    const oldest = this.now() - replayMs;
    while (this.sentFrom < this.sent.length) {
      const event = this.sent[this.sentFrom]!;
      if (this.sentBytes <= replayBytes && event.at >= oldest) break;
      this.sentBytes -= event.bytes;
      this.sentFrom++;
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
    this.graceTimer = setTimeout(
      () => this.close(CloseCode.GoingAway, 'event stream gone'),
      this.limits.graceMs,
    );
    this.graceTimer.unref();
  }
}
