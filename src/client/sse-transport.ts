// The client's side of the gateway's HTTP streaming fallback (routes.events): a WebSocket-like
// socket over one fetch stream of Server-Sent Events (the server's messages) and POSTs (the
// client's), and a socket that tries WebSocket first and falls back to it.
import type { WebSocketConstructor, WebSocketLike } from '../transport/websocket-transport.js';

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

/** How long a dropped stream is retried (resumed by Last-Event-ID) before the socket closes. */
const RESUME_ATTEMPTS = 5;
const RESUME_DELAY_MS = 250;

export interface SseSocketOptions {
  /**
   * The events URL for a gateway URL. Default: the same host and path plus "/events", ws:
   * and wss: turned into http: and https: (`ws://host/rpc` -> `http://host/rpc/events`).
   */
  eventsUrl?: (url: string) => string;
  /** The fetch to use. Default `globalThis.fetch`. */
  fetch?: typeof fetch;
}

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

/** Complete events out of `buffer` (into `into`); returns the rest. */
export function parseEvents(buffer: string, into: SseEvent[]): string {
  // A chunk that ends in "\r" may be half of a "\r\n": keep it as it is until the next one.
  const pendingCr = buffer.endsWith('\r');
  buffer = (pendingCr ? buffer.slice(0, -1) : buffer).replace(/\r\n?/g, '\n');
  let at: number;
  while ((at = buffer.indexOf('\n\n')) >= 0) {
    const block = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0) into.push({ id, event, data: data.join('\n') });
  }
  return pendingCr ? `${buffer}\r` : buffer;
}

/**
 * The WebSocket surface RpcClient uses, over the gateway's HTTP streaming fallback: opens when
 * the stream's first event names the session; a stream that drops is resumed by
 * Last-Event-ID (nothing lost); messages are POSTed one at a time, in order.
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
  private session: { session: string; secret: string } | undefined;
  private lastEventId: string | undefined;
  private readonly abort = new AbortController();
  private posting: Promise<void> = Promise.resolve();
  private queuedBytes = 0;

  constructor(
    url: string,
    _protocols?: unknown,
    options?: { headers?: Record<string, string> },
    sse: SseSocketOptions = {},
  ) {
    this.url = (sse.eventsUrl ?? defaultEventsUrl)(url);
    const found = sse.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (!found) throw new TypeError('The HTTP streaming fallback needs fetch');
    this.fetch = found.bind(globalThis);
    this.headers = options?.headers ?? {};
    void this.stream(0);
  }

  get bufferedAmount(): number {
    return this.queuedBytes;
  }

  send(data: string): void {
    if (this.readyState !== OPEN) return;
    const session = this.session!;
    this.queuedBytes += data.length;
    this.posting = this.posting.then(async () => {
      if (this.readyState !== OPEN) return;
      try {
        const res = await this.fetch(this.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-wsrpc-session': session.session,
            'x-wsrpc-secret': session.secret,
          },
          body: data,
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
      void this.posting.then(() =>
        this.fetch(this.url, {
          method: 'DELETE',
          headers: { 'x-wsrpc-session': session.session, 'x-wsrpc-secret': session.secret },
        }).catch(() => undefined),
      );
    }
    this.finish(code, reason);
  }

  /** Read the event stream; on a drop, resume it after the last event seen. */
  private async stream(attempt: number): Promise<void> {
    const headers: Record<string, string> = { ...this.headers, accept: 'text/event-stream' };
    if (this.session) {
      headers['x-wsrpc-session'] = this.session.session;
      headers['x-wsrpc-secret'] = this.session.secret;
      if (this.lastEventId !== undefined) headers['last-event-id'] = this.lastEventId;
    }
    let received = false;
    try {
      const res = await this.fetch(this.url, { headers, signal: this.abort.signal });
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => undefined);
        return this.finish(1006, `event stream answered ${res.status}`);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done || this.readyState >= CLOSING) break;
        const events: SseEvent[] = [];
        buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), events);
        for (const event of events) {
          received = true;
          if (!this.onEvent(event)) return;
        }
      }
    } catch {
      // A dropped connection: resumed below, while the socket is open.
    }
    if (this.readyState !== OPEN) return this.finish(1006, 'event stream failed');
    const next = received ? 0 : attempt + 1;
    if (next >= RESUME_ATTEMPTS) return this.finish(1006, 'event stream lost');
    await new Promise((resolve) => setTimeout(resolve, RESUME_DELAY_MS * next));
    if (this.readyState === OPEN) return this.stream(next);
  }

  /** Whether to go on reading. */
  private onEvent(event: SseEvent): boolean {
    if (event.event === 'session') {
      const hello = JSON.parse(event.data) as { session: string; secret: string };
      this.session = { session: hello.session, secret: hello.secret };
      if (this.readyState === CONNECTING) {
        this.readyState = OPEN;
        this.onopen?.({});
      }
      return true;
    }
    if (event.event === 'close') {
      const { code, reason } = JSON.parse(event.data) as { code: number; reason: string };
      this.finish(code, reason);
      return false;
    }
    if (event.id !== undefined) this.lastEventId = event.id;
    if (this.readyState === OPEN) this.onmessage?.({ data: event.data });
    return this.readyState === OPEN;
  }

  private finish(code: number, reason: string): void {
    if (this.readyState === CLOSED) return;
    const opened = this.readyState !== CONNECTING;
    this.readyState = CLOSED;
    this.abort.abort();
    if (!opened) this.onerror?.({ message: reason });
    this.onclose?.({ code, reason });
  }
}

/** A WebSocket class for `createClient` over the HTTP streaming fallback alone. */
export function sseSocket(options: SseSocketOptions = {}): WebSocketConstructor {
  return class extends SseSocket {
    constructor(url: string, protocols?: unknown, init?: { headers?: Record<string, string> }) {
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
   * long, then at twice the delay each time up to `maxProbeDelayMs`; when one opens, the
   * fallback connection closes (1012) so the client reconnects over WebSocket.
   * Default 1 000 ms, at most 30 000 ms.
   */
  probeDelayMs?: number;
  maxProbeDelayMs?: number;
}

/**
 * A WebSocket class for `createClient` that tries its `transports` in order: a WebSocket
 * that cannot open (refused, blocked, not open within `websocketTimeoutMs`) falls back to the
 * HTTP streaming fallback, with the same client on top (reconnect, subscriptions, resume).
 * Moves back up: while on the fallback, a WebSocket is tried in the background, and once one
 * opens the fallback connection closes so the client reconnects over WebSocket.
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
    init: { headers?: Record<string, string> } | undefined,
  ): WebSocketLike => {
    if (name === 'sse') return new SseSocket(url, protocols, init, options);
    if (!WebSocketClass) throw new TypeError('No WebSocket class: pass { WebSocket }');
    const Ctor = WebSocketClass as new (url: string, protocols?: unknown, init?: object) => object;
    return (init ? new Ctor(url, protocols, init) : new Ctor(url, protocols)) as WebSocketLike;
  };
  const websocketTimeoutMs = options.websocketTimeoutMs ?? 5_000;
  const firstProbe = options.probeDelayMs ?? 1_000;
  const maxProbe = options.maxProbeDelayMs ?? 30_000;

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

    constructor(
      private readonly url: string,
      private readonly protocols?: unknown,
      private readonly init?: { headers?: Record<string, string> },
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
        let probe: WebSocketLike;
        try {
          probe = make('websocket', this.url, this.protocols, this.init);
        } catch {
          return;
        }
        this.probe = probe;
        const retry = (): void => {
          probe.onopen = probe.onclose = probe.onerror = null;
          this.probe = undefined;
          if (!this.closedByUser && this.inner?.readyState === OPEN) {
            this.startProbing(Math.min(delay * 2, maxProbe));
          }
        };
        probe.onerror = () => undefined;
        probe.onclose = retry;
        probe.onopen = () => {
          probe.onclose = null;
          probe.close(1000, 'probe');
          this.probe = undefined;
          // The client reconnects at once on 1012, and the next socket starts with WebSocket.
          this.inner?.close(1012, 'websocket available');
        };
      }, delay);
      (this.probeTimer as { unref?: () => void }).unref?.();
    }

    private stopProbing(): void {
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
