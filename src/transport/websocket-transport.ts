import type { WireCodec } from '../encoding/codec.js';
import type { Transport, TransportListener } from './transport.js';
import { flushAfterTask } from './turn-coalescer.js';

/**
 * The part of the WHATWG WebSocket API the client uses. The browser's native
 * WebSocket and the `ws` package's client both provide it.
 */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly protocol: string;
  binaryType: string;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers, `WebSocket` from `ws` in Node 20. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => object;

const OPEN = 1;
/** Nesting accepted in a binary frame from the gateway: past it, a parse error, not a deep decode. */
const MAX_BINARY_DEPTH = 1_000;
const decoder = /* @__PURE__ */ new TextDecoder();

function toText(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return decoder.decode(data);
  if (ArrayBuffer.isView(data)) return decoder.decode(data);
  return String(data);
}

interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Client-side adapter over an already-open WHATWG-style WebSocket. Under Node
 * (`ws`), it corks the socket on a write and uncorks it once the current task is
 * done, as the server does (turn-coalescer); a browser's WebSocket cannot be
 * corked (see the client's `batchCalls`).
 */
export class WebSocketTransport implements Transport {
  private listener: TransportListener | undefined;
  private readonly raw: Corkable | undefined;
  private corked = false;

  /** Uncork: what was written since the cork leaves in one write (called by turn-coalescer). */
  flushWrites(): void {
    this.corked = false;
    this.raw?.uncork();
  }

  constructor(
    readonly socket: WebSocketLike,
    /** The negotiated binary codec: every frame both ways is binary. Undefined: JSON text. */
    private readonly codec?: WireCodec,
  ) {
    const raw = (socket as { _socket?: Partial<Corkable> })._socket;
    this.raw = typeof raw?.cork === 'function' ? (raw as Corkable) : undefined;
    socket.binaryType = 'arraybuffer';
    socket.onmessage = (event) => {
      const text = this.textOf(event.data);
      if (text !== undefined) this.listener?.receive(text);
    };
    socket.onclose = (event) => this.listener?.transportClosed(event.code, event.reason);
    socket.onerror = () => undefined;
  }

  /** A message's JSON text; undefined when a text frame came on a binary connection (closed 1003). */
  private textOf(data: unknown): string | undefined {
    const codec = this.codec;
    if (!codec) return toText(data);
    if (typeof data === 'string') {
      this.close(1003, `text frame on a ${codec.name} connection`);
      return undefined;
    }
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array);
    return codec.toText(bytes, MAX_BINARY_DEPTH);
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
  }

  send(frame: string): void {
    if (this.socket.readyState !== OPEN) return;
    if (this.raw && !this.corked) {
      this.corked = true;
      this.raw.cork();
      flushAfterTask(this);
    }
    this.socket.send(this.codec ? this.codec.toBinary(frame) : frame);
  }

  close(code = 1000, reason = ''): void {
    try {
      this.socket.close(code, reason);
    } catch {
      this.socket.close();
    }
  }
}
