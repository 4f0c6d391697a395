// The client's side of the gateway's HTTP streaming fallback (routes.events): a WebSocket-like
// socket over one fetch stream of Server-Sent Events (the server's messages) and POSTs (the
// client's), and a socket that tries WebSocket first and falls back to it.
import { ReservedMethod } from '../protocol/reserved.js';
import type { WebSocketConstructor, WebSocketLike } from '../transport/websocket-transport.js';

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

/**
 * Resumes (by Last-Event-ID) of a dropped stream that reach no server, in a row since the last
 * stream read, before the socket closes; the n-th waits n times RESUME_DELAY_MS first.
 */
const RESUME_ATTEMPTS = 5;
export const RESUME_DELAY_MS = 250;

/** A stream up this long was a sound one: the resume after it waits nothing. */
export const RESUME_STABLE_MS = 5_000;

/**
 * The longest a resume after streams cut short waits: well within the gateway's default
 * `sseGraceMs` (30 s), for which it keeps the session of a dropped stream.
 */
export const MAX_RESUME_DELAY_MS = 5_000;

/**
 * Streams cut short in a row, counting the one that just ended (up `upMs`, having delivered
 * application `messages` or not). One up RESUME_STABLE_MS resets the count; a short one that
 * delivered messages made progress: it counts as the first; a short one that delivered none
 * (the session event every stream starts with, at most) adds one.
 */
export function shortStreams(short: number, upMs: number, messages: boolean): number {
  if (upMs >= RESUME_STABLE_MS) return 0;
  return messages ? 1 : short + 1;
}

/**
 * What the resume after `short` streams cut short in a row waits: nothing after a sound stream,
 * else RESUME_DELAY_MS doubled for each further one, up to MAX_RESUME_DELAY_MS. A server or
 * proxy that cuts every stream at once is asked again at most once per MAX_RESUME_DELAY_MS.
 */
export function resumeDelay(short: number): number {
  return short === 0 ? 0 : Math.min(RESUME_DELAY_MS * 2 ** (short - 1), MAX_RESUME_DELAY_MS);
}

/** How one stream ended: the socket is done with; refused for `wait`; or lost. */
type StreamEnd =
  | undefined
  | { refused: number }
  | { refused?: undefined; received: boolean; upMs: number; messages: boolean };

/**
 * The longest a dropped stream stays away while the server asks the client to wait (429, or 503
 * with Retry-After): the gateway's default `sseGraceMs`, after which such a gateway has closed
 * the session. A wait that would end later closes the socket at once (1006).
 */
const MAX_RESUME_WAIT_MS = 30_000;

/** What a 429 without a Retry-After the client can read waits. */
const DEFAULT_RETRY_AFTER_MS = 1_000;

/**
 * The least a refused resume waits before it is tried again, whatever Retry-After asks (0, a
 * date past): no answer of a server or proxy makes the client resume in a loop.
 */
export const MIN_REFUSAL_WAIT_MS = 1_000;

/**
 * An HTTP-date (RFC 9110 5.6.7): IMF-fixdate, or the obsolete RFC 850 and asctime forms a
 * recipient must also read. Date.parse alone takes far more ("1.5", "-1": dates in 2001).
 */
const HTTP_DATE =
  /^[A-Z][a-z]{2}(?:, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT| [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})$|^[A-Z][a-z]{5,8}, \d\d-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d GMT$/;

/**
 * Retry-After in ms: delay-seconds or an HTTP-date (RFC 9110 10.2.3); undefined when neither.
 * Finite: more digits than a number holds ask for a wait past any cap, not for none.
 */
function retryAfterMs(value: string | null, now: number): number | undefined {
  const text = value?.trim() ?? '';
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1_000, Number.MAX_SAFE_INTEGER);
  // asctime names no zone: it is GMT, which Date.parse would not assume.
  const at = HTTP_DATE.test(text) ? Date.parse(text.endsWith('GMT') ? text : `${text} GMT`) : NaN;
  return Number.isNaN(at) ? undefined : at - now;
}

/**
 * How long a refused resume waits before it is tried again: a 429 (the gateway's resume rate)
 * what its Retry-After asks, 1 s without one it can read; a 503 (a proxy or server briefly
 * unavailable) what its Retry-After asks. Never less than MIN_REFUSAL_WAIT_MS. Undefined: the
 * answer is final (any other status, a 503 without a Retry-After it can read).
 */
export function refusalWait(
  status: number,
  retryAfter: string | null,
  now = Date.now(),
): number | undefined {
  const asked = retryAfterMs(retryAfter, now);
  const wait =
    status === 429 ? (asked ?? DEFAULT_RETRY_AFTER_MS) : status === 503 ? asked : undefined;
  return wait === undefined ? undefined : Math.max(wait, MIN_REFUSAL_WAIT_MS);
}

export interface SseSocketOptions {
  /**
   * The events URL for a gateway URL. Default: the same host and path plus "/events", ws:
   * and wss: turned into http: and https: (`ws://host/rpc` -> `http://host/rpc/events`).
   */
  eventsUrl?: (url: string) => string;
  /** The fetch to use. Default `globalThis.fetch`. */
  fetch?: typeof fetch;
  /**
   * The most characters one event may take (its lines together, as they arrive): a server or
   * proxy that sends an event without end is closed 1009 past it, not read into memory for
   * ever; so is one whose single message is larger. Default: createClient's `maxMessageBytes`
   * (100 MiB unless given; 0 there: no bound), else 100 Mi (DEFAULT_MAX_EVENT_CHARS).
   */
  maxEventChars?: number;
  /**
   * A stream that brings nothing (no event, not the comment the gateway writes every 15 s) for
   * this long is taken as dropped and resumed from the last event read: a connection that died
   * without a word (a phone that changed networks) would otherwise hold the replies sent on it
   * until the heartbeat, if any, gave the whole connection up. Default 45 000 (three of the
   * gateway's comments, DEFAULT_MAX_SILENCE_MS); 0: no bound.
   */
  maxSilenceMs?: number;
}

/** The shortest interval of keepalive POSTs, whatever a server asks. */
const MIN_KEEPALIVE_MS = 100;

/** Default of `maxSilenceMs`: three of the gateway's 15 s stream comments. */
export const DEFAULT_MAX_SILENCE_MS = 45_000;

/** What a read that met `maxSilenceMs` first gives instead of a chunk. */
const SILENT = Symbol('silent');

/** `read`, or SILENT once `ms` passed without it (`ms` 0: no bound). */
function beforeSilence<T>(read: Promise<T>, ms: number): Promise<T | typeof SILENT> {
  if (ms <= 0) return read;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const silent = new Promise<typeof SILENT>((resolve) => {
    timer = setTimeout(resolve, ms, SILENT);
  });
  return Promise.race([read, silent]).finally(() => clearTimeout(timer));
}

/** How long the DELETE that tells the server of a close may take before it is given up. */
export const CLOSE_NOTICE_MS = 5_000;

/** Default of `maxEventChars` made with no `maxPayload` (not by createClient): 100 Mi characters, as `ws`'s own default. */
export const DEFAULT_MAX_EVENT_CHARS = 100 * 1024 * 1024;

/** The default events URL of a gateway URL. */
export function defaultEventsUrl(url: string): string {
  const base = (globalThis as { location?: { href: string } }).location?.href;
  const parsed = new URL(url, base);
  if (parsed.protocol === 'ws:') parsed.protocol = 'http:';
  else if (parsed.protocol === 'wss:') parsed.protocol = 'https:';
  parsed.pathname = `${parsed.pathname.replace(/\/$/, '')}/events`;
  return parsed.href;
}

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

const LF = 10;

/**
 * Pieces a held text keeps apart before they are joined into one string (Pieces). A piece is a
 * string of its own, about 20 bytes of heap and a slot before its characters: kept as they come,
 * a line read a byte at a time (a server writing one byte a TCP segment) held some 17 bytes a
 * character (35 for characters past U+00FF), so `maxEventChars` held many times its characters.
 */
const PIECES_JOINED = 64;

/**
 * A text held in the pieces it came in, each group of PIECES_JOINED of them joined into one
 * string as it fills: a few bytes of heap beyond the characters however small the pieces, and
 * each character copied once by the groups and once by `text`, however many pieces.
 */
class Pieces {
  /** Groups already joined. */
  private groups: string[] = [];
  /** The pieces since, fewer than PIECES_JOINED. */
  private recent: string[] = [];

  constructor(private readonly separator: string) {}

  get isEmpty(): boolean {
    return this.groups.length === 0 && this.recent.length === 0;
  }

  add(piece: string): void {
    this.recent.push(piece);
    if (this.recent.length < PIECES_JOINED) return;
    this.groups.push(this.recent.join(this.separator));
    this.recent = [];
  }

  /** The whole text, the pieces let go. */
  take(): string {
    const all = this.groups.length === 0 ? this.recent : [...this.groups, ...this.recent];
    const text = all.length === 1 ? all[0]! : all.join(this.separator);
    this.groups = [];
    this.recent = [];
    return text;
  }
}

/**
 * An event stream read chunk by chunk: each chunk is scanned once, from where the last one
 * ended, so an event cut into many chunks costs its length, not its length times the number of
 * chunks, and holds about its characters' bytes however small the chunks (Pieces). Lines end
 * with CRLF, LF or CR (a CR at the end of a chunk ends its line at once; an LF that starts the
 * next chunk is then skipped); an empty line ends an event; `:` lines are comments; `id`,
 * `event` and `data` are read, other fields ignored.
 */
export class EventStreamParser {
  /** The current line's text so far, in the pieces it came in (joined once it ends). */
  private readonly line = new Pieces('');
  /** Characters of the event under way: its ended lines, and the current line's so far. */
  private eventChars = 0;
  private lineChars = 0;
  private skipLf = false;
  private id: string | undefined;
  private event = 'message';
  /** The event's data lines, joined by LF once it ends. */
  private readonly data = new Pieces('\n');
  /** An event took more than maxEventChars: nothing more is read. */
  private over = false;

  /** `maxEventChars`: past it, `push` returns undefined (the stream is to be given up). */
  constructor(private readonly maxEventChars = Infinity) {}

  /**
   * The events that `chunk` completes, in order; undefined once an event has taken more than
   * `maxEventChars` characters.
   */
  push(chunk: string, into: SseEvent[] = []): SseEvent[] | undefined {
    let at = 0;
    if (this.skipLf && chunk.charCodeAt(0) === LF) at = 1;
    this.skipLf = false;
    // The next CR and LF at or after `at`; each is searched for again only once passed.
    let cr = -1;
    let lf = -1;
    while (at < chunk.length) {
      if (cr !== Infinity && cr < at) cr = indexOrEnd(chunk, '\r', at);
      if (lf !== Infinity && lf < at) lf = indexOrEnd(chunk, '\n', at);
      const end = Math.min(cr, lf);
      if (end === Infinity) {
        this.line.add(chunk.slice(at));
        this.lineChars += chunk.length - at;
        break;
      }
      this.line.add(chunk.slice(at, end));
      const text = this.line.take();
      this.lineChars = 0;
      this.take(text, into);
      at = end + 1;
      if (end === cr) {
        if (at === chunk.length) this.skipLf = true;
        else if (chunk.charCodeAt(at) === LF) at++;
      }
    }
    return this.over || this.eventChars + this.lineChars > this.maxEventChars ? undefined : into;
  }

  private take(line: string, into: SseEvent[]): void {
    this.eventChars += line.length + 1;
    if (line === '') {
      // An event that ended within the chunk is held to the bound as one still arriving is.
      if (this.eventChars > this.maxEventChars) this.over = true;
      this.eventChars = 0;
      if (!this.data.isEmpty) {
        into.push({ id: this.id, event: this.event, data: this.data.take() });
      }
      this.id = undefined;
      this.event = 'message';
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32 /* space */) value = value.slice(1);
    if (field === 'id') this.id = value;
    else if (field === 'event') this.event = value;
    else if (field === 'data') this.data.add(value);
  }
}

function indexOrEnd(text: string, char: string, from: number): number {
  const at = text.indexOf(char, from);
  return at < 0 ? Infinity : at;
}

/**
 * The complete events of `text` (into `into`); returns the text after the last of them, which,
 * with the next chunk appended, reads as the stream goes on. For a text at hand; a stream is
 * read with one EventStreamParser, which does not scan again what it has scanned.
 */
export function parseEvents(text: string, into: SseEvent[]): string {
  // The end of the last complete event: after its blank line (CRLF, LF or CR).
  // (A CR followed by an LF is one line end, never two.)
  const ends = [...text.matchAll(/(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))/g)];
  let cut = 0;
  const parser = new EventStreamParser();
  for (const end of ends) {
    const after = end.index + end[0].length;
    parser.push(text.slice(cut, after), into);
    cut = after;
  }
  return text.slice(cut);
}

/**
 * Characters (UTF-16 code units, as `bufferedAmount` counts them here) of messages an SseSocket
 * holds while they wait to be POSTed, one POST at a time, in order. A message that would take it
 * past this closes the socket (1008): the server is not taking them as fast as they come, and
 * holding more would only grow the client's memory.
 */
export const MAX_QUEUED_POST_CHARS = 4 * 1024 * 1024;

/** Report an error thrown by the application's event handler, as a host reports a listener's. */
function reportHandlerError(err: unknown): void {
  const report = (globalThis as { reportError?: (err: unknown) => void }).reportError;
  if (typeof report === 'function') report(err);
  else
    setTimeout(() => {
      throw err;
    }, 0);
}

/**
 * The WebSocket surface RpcClient uses, over the gateway's HTTP streaming fallback: opens when
 * the stream's first event names the session; a stream that drops is resumed by
 * Last-Event-ID (nothing lost), paced as resumeDelay says after streams cut short, a resume refused 429 (or 503 with Retry-After) tried again once
 * its Retry-After is over (refusalWait: at least 1 s), within MAX_RESUME_WAIT_MS of the drop;
 * messages are POSTed one at a time, in order, at most
 * `MAX_QUEUED_POST_CHARS` of them waiting (past it, the socket closes with 1008). An exception
 * thrown by a handler (`onmessage`, `onopen`...) is reported as a host reports a listener's
 * (`reportError`, else thrown in a task of its own): it never reads as a dropped stream.
 */
export class SseSocket implements WebSocketLike {
  readyState = CONNECTING;
  readonly protocol = '';
  binaryType = 'arraybuffer';
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  private readonly url: string;
  private readonly fetch: typeof fetch;
  private readonly headers: Record<string, string>;
  private readonly maxEventChars: number;
  private readonly maxSilenceMs: number;
  private session: { session: string; secret: string } | undefined;
  /**
   * The id of the last event read: where a resume starts. Before any, where the first stream
   * started (its session event's `lastEventId`, else 0).
   */
  private lastEventId = '0';
  private readonly abort = new AbortController();
  private posting: Promise<void> = Promise.resolve();
  /** Sent a POST since the keepalive ticker last looked. */
  private posted = false;
  private keepalive: ReturnType<typeof setInterval> | undefined;
  /** A keepalive POST not answered yet: the next waits for it (a hung one is not piled on). */
  private keepaliveOut = false;
  private queuedBytes = 0;

  constructor(
    url: string,
    _protocols?: unknown,
    options?: { headers?: Record<string, string>; maxPayload?: number },
    sse: SseSocketOptions = {},
  ) {
    this.url = (sse.eventsUrl ?? defaultEventsUrl)(url);
    const found = sse.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (!found) throw new TypeError('The HTTP streaming fallback needs fetch');
    this.fetch = found.bind(globalThis);
    this.headers = options?.headers ?? {};
    // createClient's maxMessageBytes, as it gives `ws` (0: no bound).
    const maxPayload = options?.maxPayload;
    this.maxSilenceMs = sse.maxSilenceMs ?? DEFAULT_MAX_SILENCE_MS;
    this.maxEventChars =
      sse.maxEventChars ??
      (maxPayload === undefined ? DEFAULT_MAX_EVENT_CHARS : maxPayload || Infinity);
    void this.stream();
  }

  get bufferedAmount(): number {
    return this.queuedBytes;
  }

  send(data: string): void {
    if (this.readyState !== OPEN) return;
    if (this.queuedBytes + data.length > MAX_QUEUED_POST_CHARS) {
      this.close(1008, `more than ${MAX_QUEUED_POST_CHARS} characters waiting to be POSTed`);
      return;
    }
    const session = this.session!;
    this.posted = true;
    this.queuedBytes += data.length;
    this.posting = this.posting.then(async () => {
      try {
        if (this.readyState !== OPEN) return;
        const res = await this.fetch(this.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-wsrpc-session': session.session,
            'x-wsrpc-secret': session.secret,
          },
          body: data,
          credentials: 'include',
          signal: this.abort.signal,
        });
        // A session the server no longer has: this connection is over.
        if (res.status === 404) this.finish(1006, 'session gone');
        else if (!res.ok) this.finish(1006, `POST answered ${res.status}`);
      } catch {
        this.finish(1006, 'POST failed');
      } finally {
        this.queuedBytes -= data.length;
      }
    });
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState >= CLOSING) return;
    const session = this.session;
    this.readyState = CLOSING;
    if (session) {
      // Tell the server at once rather than leave it waiting out its grace period.
      void this.posting.then(async () => {
        try {
          await this.fetch(this.url, {
            method: 'DELETE',
            headers: { 'x-wsrpc-session': session.session, 'x-wsrpc-secret': session.secret },
            credentials: 'include',
            // A server that never answers would hold the request (and, over HTTP/1.1, one of
            // the few connections a browser opens to the origin) until the browser gives up.
            signal: AbortSignal.timeout(CLOSE_NOTICE_MS),
          });
        } catch {
          // Not told: the server ends the session once its grace period is over.
        }
      });
    }
    this.finish(code, reason);
  }

  /**
   * Read the event stream; on a drop, resume it after the last event seen, in a loop (no
   * promise chain grows with the resumes). A resume that reaches no server waits
   * RESUME_DELAY_MS times the number of such resumes in a row (RESUME_ATTEMPTS of them close
   * the socket); one refused waits what refusalWait says; one after a stream that read
   * anything waits resumeDelay of the streams cut short in a row.
   */
  private async stream(): Promise<void> {
    let attempt = 0;
    let short = 0;
    let lostAt = 0;
    for (;;) {
      const end = await this.streamOnce(lostAt);
      if (!end) return;
      let wait: number;
      if (end.refused !== undefined) wait = end.refused;
      else {
        if (this.readyState !== OPEN) return this.finish(1006, 'event stream failed');
        if (end.received) {
          attempt = 0;
          lostAt = Date.now();
          short = shortStreams(short, end.upMs, end.messages);
        } else if (++attempt >= RESUME_ATTEMPTS) return this.finish(1006, 'event stream lost');
        wait = Math.max(RESUME_DELAY_MS * attempt, resumeDelay(short));
      }
      await this.sleep(wait);
      if (this.readyState !== OPEN) return;
    }
  }

  /**
   * One stream, read until it drops. `lostAt` is when the last stream that read anything
   * dropped: a refusal whose wait would end more than MAX_RESUME_WAIT_MS after it closes the
   * socket.
   */
  private async streamOnce(lostAt: number): Promise<StreamEnd> {
    const headers: Record<string, string> = { ...this.headers, accept: 'text/event-stream' };
    if (this.session) {
      headers['x-wsrpc-session'] = this.session.session;
      headers['x-wsrpc-secret'] = this.session.secret;
      // Always named: a resume without it is given nothing the stream missed.
      headers['last-event-id'] = this.lastEventId;
    }
    let received = false;
    let messages = false;
    let upAt = 0;
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    try {
      const res = await this.fetch(this.session ? this.url : this.openingUrl(), {
        headers,
        credentials: 'include',
        signal: this.abort.signal,
      });
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => undefined);
        const wait = this.session
          ? refusalWait(res.status, res.headers.get('retry-after'))
          : undefined;
        if (wait === undefined)
          return void this.finish(1006, `event stream answered ${res.status}`);
        if (Date.now() + wait - lostAt > MAX_RESUME_WAIT_MS) {
          return void this.finish(1006, `event stream answered ${res.status}, wait past the cap`);
        }
        // The server is there, only busy: the same resume again once the wait is over.
        return { refused: wait };
      }
      reader = res.body.getReader();
      upAt = Date.now();
    } catch {
      // Not connected: retried, while the socket is open.
    }
    if (reader) {
      const decoder = new TextDecoder();
      const parser = new EventStreamParser(this.maxEventChars);
      for (;;) {
        // Only the read is the stream's: what the handlers throw is theirs (see onEvent).
        let chunk: ReadableStreamReadResult<Uint8Array> | typeof SILENT;
        try {
          chunk = await beforeSilence(reader.read(), this.maxSilenceMs);
        } catch {
          break; // a dropped connection: resumed, while the socket is open
        }
        // Silent past maxSilenceMs: a connection that died unsaid, resumed as a dropped one.
        if (chunk === SILENT) {
          reader.cancel().catch(() => undefined);
          break;
        }
        if (chunk.done || this.readyState >= CLOSING) break;
        const events = parser.push(decoder.decode(chunk.value, { stream: true }));
        if (!events) {
          reader.cancel().catch(() => undefined);
          return void this.finish(1009, `an event over ${this.maxEventChars} characters`);
        }
        for (const event of events) {
          received = true;
          if (event.event !== 'session') messages = true;
          if (!this.onEvent(event)) {
            reader.cancel().catch(() => undefined);
            return;
          }
        }
      }
    }
    return { received, upMs: reader ? Date.now() - upAt : 0, messages };
  }

  /** `ms`, or less once the socket closes (no timer outlives it). */
  private sleep(ms: number): Promise<void> {
    const { signal } = this.abort;
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }

  /** Whether to go on reading. */
  private onEvent(event: SseEvent): boolean {
    if (event.event === 'session') {
      const hello = parseJson(event.data) as
        { session?: unknown; secret?: unknown; lastEventId?: unknown } | undefined;
      if (typeof hello?.session !== 'string' || typeof hello.secret !== 'string') {
        this.finish(1006, 'malformed session event');
        return false;
      }
      // A resumed stream is this session's, going on after the last event read: another
      // session (a proxy that dropped the session's headers), or a stream going on from
      // elsewhere, would lose what this session sent unsaid. The connection is lost instead.
      if (
        this.readyState !== CONNECTING &&
        (hello.session !== this.session?.session ||
          String(hello.lastEventId) !== (this.lastEventId ?? '0'))
      ) {
        this.finish(1006, 'the resumed stream does not go on from this session');
        return false;
      }
      this.session = { session: hello.session, secret: hello.secret };
      const every = (hello as { keepaliveMs?: unknown }).keepaliveMs;
      if (this.keepalive === undefined && typeof every === 'number' && every > 0) {
        this.keepAlive(every);
      }
      if (this.readyState === CONNECTING) {
        // The first stream's events follow on from where its session event says. A resumed
        // stream's session event says where that stream goes on, not what this socket has
        // read: it moves nothing.
        const start = hello.lastEventId;
        if (typeof start === 'number' && Number.isSafeInteger(start) && start >= 0) {
          this.lastEventId = String(start);
        }
        this.readyState = OPEN;
        this.emit(this.onopen, {});
      }
      return true;
    }
    if (event.event === 'close') {
      const close = parseJson(event.data) as { code?: unknown; reason?: unknown } | undefined;
      const code = typeof close?.code === 'number' ? close.code : 1006;
      this.finish(code, typeof close?.reason === 'string' ? close.reason : '');
      return false;
    }
    if (event.id !== undefined) this.lastEventId = event.id;
    if (this.readyState === OPEN) this.emit(this.onmessage, { data: event.data });
    return this.readyState === OPEN;
  }

  /** Call an application handler; what it throws is reported, not taken for a stream failure. */
  private emit<E>(handler: ((event: E) => void) | null, event: E): void {
    if (!handler) return;
    try {
      handler.call(this, event);
    } catch (err) {
      reportHandlerError(err);
    }
  }

  /**
   * The opening GET's URL: it asks the gateway to expect word from this client (its keepalives,
   * below), so that the session can be given up once this client is gone without a word. A
   * query parameter, not a header: a GET with no header of its own needs no CORS preflight.
   */
  private openingUrl(): string {
    const url = new URL(this.url);
    url.searchParams.set('keepalive', '1');
    return url.href;
  }

  /**
   * Be heard from at least every `everyMs` (the gateway's keepaliveMs): every half of it, a POST
   * with the keepalive header and no body unless a message was POSTed since the last look.
   */
  private keepAlive(everyMs: number): void {
    this.keepalive = setInterval(
      () => {
        const session = this.session;
        if (this.posted || this.readyState !== OPEN || !session || this.keepaliveOut) {
          this.posted = false;
          return;
        }
        this.keepaliveOut = true;
        // One out at a time, and given up once the gateway's window (everyMs) has passed without
        // an answer: a keepalive held somewhere (a dead pooled connection, a proxy) must not keep
        // the next ones from going.
        const given = new AbortController();
        const giveUp = (): void => given.abort();
        const timer = setTimeout(giveUp, everyMs);
        this.abort.signal.addEventListener('abort', giveUp);
        this.fetch(this.url, {
          method: 'POST',
          headers: {
            'x-wsrpc-session': session.session,
            'x-wsrpc-secret': session.secret,
            'x-wsrpc-keepalive': '1',
          },
          credentials: 'include',
          signal: given.signal,
        })
          .then(
            // Nothing to read: the body let go; neither it nor a connection lost is the
            // application's (the stream tells of a lost connection, and is resumed).
            (res) => res.body?.cancel().catch(() => undefined),
            () => undefined,
          )
          .finally(() => {
            clearTimeout(timer);
            this.abort.signal.removeEventListener('abort', giveUp);
            this.keepaliveOut = false;
          });
      },
      Math.max(MIN_KEEPALIVE_MS, everyMs / 2),
    );
  }

  private finish(code: number, reason: string): void {
    if (this.readyState === CLOSED) return;
    clearInterval(this.keepalive);
    const opened = this.readyState !== CONNECTING;
    this.readyState = CLOSED;
    this.abort.abort();
    if (!opened) this.emit(this.onerror, { message: reason });
    this.emit(this.onclose, { code, reason });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A WebSocket class for `createClient` over the HTTP streaming fallback alone. */
export function sseSocket(options: SseSocketOptions = {}): WebSocketConstructor {
  return class extends SseSocket {
    constructor(
      url: string,
      protocols?: unknown,
      init?: { headers?: Record<string, string>; maxPayload?: number },
    ) {
      super(url, protocols, init, options);
    }
  };
}

export type TransportName = 'websocket' | 'sse';

export interface FallbackSocketOptions extends SseSocketOptions {
  /** The transports to try, in order of preference. Default ['websocket', 'sse']. */
  transports?: readonly TransportName[];
  /** The WebSocket class. Default `globalThis.WebSocket`; in Node 20 `WebSocket` from `ws`. */
  WebSocket?: WebSocketConstructor;
  /** A WebSocket not open after this long counts as blocked. Default 5 000 ms. */
  websocketTimeoutMs?: number;
  /**
   * Once on a less preferred transport, a WebSocket is tried in the background after this
   * long, then at twice the delay each time up to `maxProbeDelayMs`; when one opens, the client
   * leaves the fallback connection as a draining server's (rpc.reconnect): its calls out are
   * answered there, then it reconnects over WebSocket.
   * Default 1 000 ms, at most 30 000 ms.
   */
  probeDelayMs?: number;
  maxProbeDelayMs?: number;
  /**
   * How long the fallback connection is kept, once a WebSocket opened, for its user to close
   * it; then it closes (1012). The client closes it sooner: once its calls are answered, or
   * after its `connectTimeoutMs` with those still out rejected. Default 30 000 ms.
   */
  moveDeadlineMs?: number;
}

/**
 * A WebSocket class for `createClient` that tries its `transports` in order: a WebSocket
 * that cannot open (refused, blocked, not open within `websocketTimeoutMs`) falls back to the
 * HTTP streaming fallback, with the same client on top (reconnect, subscriptions, resume).
 * Moves back up: while on the fallback, a WebSocket is tried in the background, and once one
 * opens the client leaves the fallback connection as a draining server's, its calls answered
 * there first, and reconnects over WebSocket.
 * `createClient({ url, WebSocket: fallbackSocket({ WebSocket }) })`.
 */
export function fallbackSocket(options: FallbackSocketOptions = {}): WebSocketConstructor {
  const transports = options.transports ?? ['websocket', 'sse'];
  for (const name of transports) {
    if (name !== 'websocket' && name !== 'sse') {
      throw new TypeError(`transports may hold "websocket" and "sse", not ${JSON.stringify(name)}`);
    }
  }
  if (transports.length === 0) throw new TypeError('transports must name at least one transport');
  const WebSocketClass =
    options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  const make = (
    name: TransportName,
    url: string,
    protocols: unknown,
    init: { headers?: Record<string, string>; maxPayload?: number } | undefined,
  ): WebSocketLike => {
    if (name === 'sse') return new SseSocket(url, protocols, init, options);
    if (!WebSocketClass) throw new TypeError('No WebSocket class: pass { WebSocket }');
    const Ctor = WebSocketClass as new (url: string, protocols?: unknown, init?: object) => object;
    return (init ? new Ctor(url, protocols, init) : new Ctor(url, protocols)) as WebSocketLike;
  };
  const websocketTimeoutMs = options.websocketTimeoutMs ?? 5_000;
  const firstProbe = options.probeDelayMs ?? 1_000;
  const maxProbe = options.maxProbeDelayMs ?? 30_000;
  const moveDeadlineMs = options.moveDeadlineMs ?? 30_000;

  return class FallbackSocket implements WebSocketLike {
    onopen: ((event: unknown) => void) | null = null;
    onmessage: ((event: { data: unknown }) => void) | null = null;
    onclose: ((event: { code: number; reason: string }) => void) | null = null;
    onerror: ((event: unknown) => void) | null = null;
    binaryType = 'arraybuffer';
    /** The transport this socket runs on (or is trying). */
    transport: TransportName = transports[0]!;
    private inner: WebSocketLike | undefined;
    private closedByUser: { code: number; reason: string } | undefined;
    private probeTimer: ReturnType<typeof setTimeout> | undefined;
    private probe: WebSocketLike | undefined;
    private moveDeadline: ReturnType<typeof setTimeout> | undefined;

    constructor(
      private readonly url: string,
      private readonly protocols?: unknown,
      private readonly init?: { headers?: Record<string, string>; maxPayload?: number },
    ) {
      this.attempt(0);
    }

    get readyState(): number {
      if (this.closedByUser && !this.inner) return CLOSED;
      return this.inner?.readyState ?? CONNECTING;
    }
    get bufferedAmount(): number {
      return this.inner?.bufferedAmount ?? 0;
    }
    get protocol(): string {
      return this.inner?.protocol ?? '';
    }

    send(data: string): void {
      this.inner?.send(data);
    }

    close(code?: number, reason?: string): void {
      this.closedByUser = { code: code ?? 1000, reason: reason ?? '' };
      this.stopProbing();
      this.inner?.close(code, reason);
    }

    /** Try transport `index`; before it opens, a failure moves on to the next. */
    private attempt(index: number): void {
      const name = transports[index]!;
      this.transport = name;
      let socket: WebSocketLike;
      try {
        socket = make(name, this.url, this.protocols, this.init);
      } catch (err) {
        if (index + 1 < transports.length) return this.attempt(index + 1);
        throw err;
      }
      this.inner = socket;
      socket.binaryType = this.binaryType;
      let opened = false;
      let movedOn = false;
      const moveOn = (): boolean => {
        if (opened || movedOn || this.closedByUser || index + 1 >= transports.length) return false;
        movedOn = true;
        clearTimeout(timer);
        socket.onopen = socket.onclose = socket.onerror = socket.onmessage = null;
        try {
          socket.close();
        } catch {
          // still connecting in a browser: nothing to close cleanly
        }
        this.attempt(index + 1);
        return true;
      };
      const timer =
        name === 'websocket' ? setTimeout(() => moveOn(), websocketTimeoutMs) : undefined;
      (timer as { unref?: () => void } | undefined)?.unref?.();
      socket.onopen = (event) => {
        opened = true;
        clearTimeout(timer);
        if (index > 0 && transports.indexOf('websocket') < index) this.startProbing(firstProbe);
        this.onopen?.(event);
      };
      socket.onmessage = (event) => this.onmessage?.(event);
      socket.onerror = (event) => {
        if (!opened && index + 1 < transports.length) return; // its close moves on
        this.onerror?.(event);
      };
      socket.onclose = (event) => {
        if (moveOn()) return;
        clearTimeout(timer);
        this.stopProbing();
        this.onclose?.(event);
      };
    }

    /** While on a fallback: try a WebSocket now and then; once one opens, move back up. */
    private startProbing(delay: number): void {
      this.probeTimer = setTimeout(() => {
        this.probeTimer = undefined;
        const tryAgain = (): void => {
          if (!this.closedByUser && this.inner?.readyState === OPEN) {
            this.startProbing(Math.min(delay * 2, maxProbe));
          }
        };
        let probe: WebSocketLike;
        try {
          probe = make('websocket', this.url, this.protocols, this.init);
        } catch {
          // A constructor that throws (a URL it rejects, a port a browser blocks) is one failed
          // attempt, as a refused upgrade is: what made it throw may pass.
          return tryAgain();
        }
        this.probe = probe;
        const retry = (): void => {
          probe.onopen = probe.onclose = probe.onerror = null;
          this.probe = undefined;
          tryAgain();
        };
        probe.onerror = () => undefined;
        probe.onclose = retry;
        probe.onopen = () => {
          probe.onclose = null;
          probe.close(1000, 'probe');
          this.probe = undefined;
          this.moveUp();
        };
      }, delay);
      (this.probeTimer as { unref?: () => void }).unref?.();
    }

    /**
     * A WebSocket opens: leave this connection as a draining server has the client leave one
     * (the reserved notification rpc.reconnect, naming this URL). The client sends it no new
     * call, lets the calls out on it be answered, still handles what arrives on it, then closes
     * it and reconnects, the next socket starting with WebSocket. A socket not closed within
     * `moveDeadlineMs` (one under something other than the client) is closed (1012) then.
     */
    private moveUp(): void {
      const inner = this.inner;
      if (!inner || inner.readyState !== OPEN) return;
      const deadline = setTimeout(() => {
        if (this.inner === inner) inner.close(1012, 'websocket available');
      }, moveDeadlineMs);
      (deadline as { unref?: () => void }).unref?.();
      this.moveDeadline = deadline;
      const notice = {
        jsonrpc: '2.0',
        method: ReservedMethod.Reconnect,
        params: { url: this.url },
      };
      this.onmessage?.({ data: JSON.stringify(notice) });
    }

    private stopProbing(): void {
      clearTimeout(this.moveDeadline);
      clearTimeout(this.probeTimer);
      this.probeTimer = undefined;
      const probe = this.probe;
      this.probe = undefined;
      if (probe) {
        probe.onopen = probe.onclose = probe.onerror = null;
        try {
          probe.close();
        } catch {
          // a probe still connecting
        }
      }
    }
  };
}
