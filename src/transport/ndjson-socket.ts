import { connect as connectTcp, isIP } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { connect as connectTls } from 'node:tls';
import type { ConnectionOptions } from 'node:tls';
import { LineSplitter } from './ndjson-lines.js';
import { CloseCode } from './transport.js';
import type { WebSocketConstructor, WebSocketLike } from './websocket-transport.js';

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

/** Default of `maxLineBytes`: 1 MiB, as the gateway's `maxMessageBytes`. */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
/** UTF-8 takes at most 3 bytes per UTF-16 code unit (4 per surrogate pair). */
const MAX_UTF8_PER_UNIT = 3;

/**
 * How the gateway's close notice begins: the last line of an NDJSON connection it closes, a
 * JSON-RPC notification `rpc.close` with `{ code, reason }` (what a WebSocket's close frame
 * carries; docs/wire-protocol.md). Written and read with this exact beginning, so every other
 * line is told apart by one comparison.
 */
export const CLOSE_NOTICE_PREFIX = '{"jsonrpc":"2.0","method":"rpc.close","params":';

/** The code and reason of a close notice, or undefined when `line` is none (or malformed). */
function closeNoticeOf(line: string): { code: number; reason: string } | undefined {
  if (!line.startsWith(CLOSE_NOTICE_PREFIX)) return undefined;
  let notice: unknown;
  try {
    notice = JSON.parse(line);
  } catch {
    return undefined;
  }
  const params = (notice as { params?: unknown }).params;
  if (typeof params !== 'object' || params === null) return undefined;
  const { code, reason } = params as { code?: unknown; reason?: unknown };
  // The codes a WebSocket close frame may carry.
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 1000 || code > 4999) {
    return undefined;
  }
  return { code, reason: typeof reason === 'string' ? reason : '' };
}

/** Options of the newline-delimited JSON sockets (`tcpSocket`, `streamSocket`). */
interface LineOptions {
  /**
   * Longest line taken from the other side, in UTF-8 bytes. Past it what is held is dropped and
   * the connection closes with 1009 'message too large', as the gateway's own NDJSON transport
   * does past `maxMessageBytes`. Default 1 MiB (DEFAULT_MAX_LINE_BYTES).
   */
  maxLineBytes?: number;
}

/**
 * The WebSocket surface RpcClient uses, over newline-delimited JSON on a pair of streams,
 * so the same client (reconnect, subscriptions, resume) talks to `gateway.listenTcp` and
 * `gateway.serveStream`. Node only.
 */
class NdjsonSocket implements WebSocketLike {
  readyState = CONNECTING;
  readonly protocol = '';
  binaryType = 'arraybuffer';
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  private readonly lines = new LineSplitter();
  private early: string[] | undefined;
  private closeCode = 1006;
  private closeReason = 'connection lost';
  private readonly maxLineBytes: number;

  protected constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    options: LineOptions,
  ) {
    this.maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    input.setEncoding('utf8');
    input.on('data', (chunk: string) => this.onData(chunk));
    input.on('error', (err) => this.onerror?.(err));
    input.on('close', () => this.finish());
    input.on('end', () => {
      // A last line without its newline is still a message (what is held is within the limit).
      const last = this.readyState < CLOSING ? this.lines.end() : undefined;
      if (last !== undefined) this.onLines([last]);
      this.finish();
    });
    if ((output as unknown) !== (input as unknown)) output.on('error', () => undefined);
  }

  get bufferedAmount(): number {
    return this.output.writableLength;
  }

  send(data: string): void {
    if (this.readyState !== OPEN) return;
    this.output.write(`${data}\n`);
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState >= CLOSING) return;
    this.readyState = CLOSING;
    this.closeCode = code;
    this.closeReason = reason;
    this.output.end();
    if ((this.output as unknown) !== (this.input as unknown)) this.finish();
  }

  /** Stop reading (WebSocketTransport, while the other side leaves too much unread). */
  pause(): void {
    if (this.readyState === OPEN) this.input.pause();
  }

  resume(): void {
    if (this.readyState === OPEN) this.input.resume();
  }

  protected opened(): void {
    if (this.readyState !== CONNECTING) return;
    this.readyState = OPEN;
    this.onopen?.({});
    const early = this.early;
    this.early = undefined;
    for (const line of early ?? []) if (this.readyState === OPEN) this.onmessage?.({ data: line });
  }

  private onData(chunk: string): void {
    // Closing: nothing more is delivered, so nothing more is held either.
    if (this.readyState >= CLOSING) return;
    this.onLines(this.lines.push(chunk));
    if (this.lines.heldBytes > this.maxLineBytes) this.tooLarge();
  }

  private onLines(lines: string[]): void {
    for (const line of lines) {
      if (this.readyState >= CLOSING) return;
      if (this.overLimit(line)) return this.tooLarge();
      const notice = closeNoticeOf(line);
      if (notice) return this.closedByPeer(notice.code, notice.reason);
      if (this.readyState === OPEN) this.onmessage?.({ data: line });
      // Written before the client attached (e.g. a greeting): kept for the open.
      else if (this.readyState === CONNECTING) (this.early ??= []).push(line);
    }
  }

  /** Measured in bytes only when its length says it may be over. */
  private overLimit(line: string): boolean {
    return (
      line.length * MAX_UTF8_PER_UNIT > this.maxLineBytes &&
      Buffer.byteLength(line) > this.maxLineBytes
    );
  }

  /**
   * The other side's close notice: the close event tells its code and reason, as a WebSocket's
   * does a close frame's, once the other side's end comes (nothing is delivered after it). Our
   * side ends at once, as a WebSocket answers a close frame.
   */
  private closedByPeer(code: number, reason: string): void {
    this.readyState = CLOSING;
    this.closeCode = code;
    this.closeReason = reason;
    this.lines.clear();
    this.early = undefined;
    this.output.end();
  }

  /** A line past the limit: drop it and close, and read no more of what the other side sends. */
  private tooLarge(): void {
    this.lines.clear();
    this.early = undefined;
    this.close(CloseCode.MessageTooBig, 'message too large');
    this.input.destroy();
  }

  private finish(): void {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    this.onclose?.({ code: this.closeCode, reason: this.closeReason });
  }
}

/**
 * Options of `tcpSocket`: TLS settings for tls:// URLs (e.g. `ca`, `rejectUnauthorized`), and
 * `maxLineBytes`, the longest line taken from the server (default 1 MiB; past it the connection
 * closes with 1009 'message too large').
 */
export type TcpSocketOptions = Pick<ConnectionOptions, 'ca' | 'rejectUnauthorized' | 'servername'> &
  LineOptions;

/**
 * A WebSocket class for `createClient` that connects to `tcp://host:port` (or `tls://host:port`)
 * and speaks newline-delimited JSON: `createClient({ url: 'tcp://127.0.0.1:9000', WebSocket: tcpSocket() })`.
 */
export function tcpSocket(options: TcpSocketOptions = {}): WebSocketConstructor {
  const { maxLineBytes, ...tls } = options;
  return class TcpSocket extends NdjsonSocket {
    constructor(url: string) {
      const { protocol, hostname, port } = new URL(url);
      if (protocol !== 'tcp:' && protocol !== 'tls:') {
        throw new TypeError(`tcpSocket needs a tcp:// or tls:// URL, not ${url}`);
      }
      const host = hostname.replace(/^\[|\]$/g, '');
      const socket =
        protocol === 'tls:'
          ? connectTls({
              host,
              port: Number(port),
              // SNI carries host names only (RFC 6066): none for an IP address.
              ...(isIP(host) === 0 ? { servername: host } : {}),
              ...tls,
            })
          : connectTcp({ host, port: Number(port) });
      super(socket, socket, { maxLineBytes });
      socket.setNoDelay?.(true);
      socket.once(protocol === 'tls:' ? 'secureConnect' : 'connect', () => this.opened());
    }
  };
}

/**
 * A WebSocket class for `createClient` over a pair of streams, e.g. a child process's stdout
 * and stdin: `createClient({ url: 'stdio:', WebSocket: streamSocket(child.stdout, child.stdin),
 * reconnect: false })`. The streams carry one connection: do not reconnect. `maxLineBytes`: the
 * longest line taken from `input` (default 1 MiB; past it the connection closes with 1009).
 */
export function streamSocket(
  input: Readable,
  output: Writable,
  options: Pick<TcpSocketOptions, 'maxLineBytes'> = {},
): WebSocketConstructor {
  return class StreamSocket extends NdjsonSocket {
    constructor() {
      super(input, output, options);
      // RpcClient sets its handlers right after construction: open on the next turn.
      setImmediate(() => this.opened());
    }
  };
}
