import { connect as connectTcp, isIP } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { connect as connectTls } from 'node:tls';
import type { ConnectionOptions } from 'node:tls';
import { LineSplitter } from './ndjson-lines.js';
import type { WebSocketConstructor, WebSocketLike } from './websocket-transport.js';

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

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

  protected constructor(
    private readonly input: Readable,
    private readonly output: Writable,
  ) {
    input.setEncoding('utf8');
    input.on('data', (chunk: string) => this.onData(chunk));
    input.on('error', (err) => this.onerror?.(err));
    input.on('close', () => this.finish());
    input.on('end', () => {
      const last = this.lines.end(); // a last line without its newline is still a message
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

  protected opened(): void {
    if (this.readyState !== CONNECTING) return;
    this.readyState = OPEN;
    this.onopen?.({});
    const early = this.early;
    this.early = undefined;
    for (const line of early ?? []) if (this.readyState === OPEN) this.onmessage?.({ data: line });
  }

  private onData(chunk: string): void {
    this.onLines(this.lines.push(chunk));
  }

  private onLines(lines: string[]): void {
    for (const line of lines) {
      if (this.readyState === OPEN) this.onmessage?.({ data: line });
      // Written before the client attached (e.g. a greeting): kept for the open.
      else if (this.readyState === CONNECTING) (this.early ??= []).push(line);
    }
  }

  private finish(): void {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    this.onclose?.({ code: this.closeCode, reason: this.closeReason });
  }
}

/** Options of `tcpSocket`: TLS settings for tls:// URLs (e.g. `ca`, `rejectUnauthorized`). */
export type TcpSocketOptions = Pick<ConnectionOptions, 'ca' | 'rejectUnauthorized' | 'servername'>;

/**
 * A WebSocket class for `createClient` that connects to `tcp://host:port` (or `tls://host:port`)
 * and speaks newline-delimited JSON: `createClient({ url: 'tcp://127.0.0.1:9000', WebSocket: tcpSocket() })`.
 */
export function tcpSocket(options: TcpSocketOptions = {}): WebSocketConstructor {
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
              ...options,
            })
          : connectTcp({ host, port: Number(port) });
      super(socket, socket);
      socket.setNoDelay?.(true);
      socket.once(protocol === 'tls:' ? 'secureConnect' : 'connect', () => this.opened());
    }
  };
}

/**
 * A WebSocket class for `createClient` over a pair of streams, e.g. a child process's stdout
 * and stdin: `createClient({ url: 'stdio:', WebSocket: streamSocket(child.stdout, child.stdin),
 * reconnect: false })`. The streams carry one connection: do not reconnect.
 */
export function streamSocket(input: Readable, output: Writable): WebSocketConstructor {
  return class StreamSocket extends NdjsonSocket {
    constructor() {
      super(input, output);
      // RpcClient sets its handlers right after construction: open on the next turn.
      setImmediate(() => this.opened());
    }
  };
}
