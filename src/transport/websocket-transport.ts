import type { Transport, TransportListener } from './transport.js';

/**
 * The part of the WHATWG WebSocket API the client uses. The browser's native
 * WebSocket and the `ws` package's client both provide it.
 */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  readonly protocol: string;
  binaryType: string;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers, `WebSocket` from `ws` in Node 20. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => object;

const OPEN = 1;
const decoder = /* @__PURE__ */ new TextDecoder();

function toText(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return decoder.decode(data);
  if (ArrayBuffer.isView(data)) return decoder.decode(data);
  return String(data);
}

/** Client-side adapter over an already-open WHATWG-style WebSocket. */
export class WebSocketTransport implements Transport {
  private listener: TransportListener | undefined;

  constructor(readonly socket: WebSocketLike) {
    socket.binaryType = 'arraybuffer';
    socket.onmessage = (event) => this.listener?.message(toText(event.data));
    socket.onclose = (event) => this.listener?.close(event.code, event.reason);
    socket.onerror = () => undefined;
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
  }

  send(frame: string): void {
    if (this.socket.readyState === OPEN) this.socket.send(frame);
  }

  close(code = 1000, reason = ''): void {
    try {
      this.socket.close(code, reason);
    } catch {
      this.socket.close();
    }
  }
}
