import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import { CloseCode } from './transport.js';
import type { Transport, TransportListener } from './transport.js';

function toText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/**
 * Server-side adapter over a `ws` WebSocket. Binary frames are read as UTF-8 text.
 * A close whose handshake does not finish within `closeGraceMs` (a peer that
 * stopped reading never sees our close frame) ends in `terminate()`, so a
 * stalled socket's buffers are freed in bounded time.
 */
export class WsTransport implements Transport {
  private listener: TransportListener | undefined;
  private early: string[] = [];
  private closeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly socket: WebSocket,
    private readonly closeGraceMs = 2_000,
  ) {
    socket.on('message', (data) => {
      const text = toText(data);
      if (this.listener) this.listener.message(text);
      else this.early.push(text);
    });
    socket.on('close', (code, reason) => {
      clearTimeout(this.closeTimer);
      this.listener?.close(code, reason.toString('utf8'));
    });
    // 'close' always follows 'error'; the listener is what keeps ws from throwing.
    socket.on('error', () => undefined);
  }

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
    const early = this.early;
    this.early = [];
    for (const text of early) listener.message(text);
  }

  send(frame: string): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(frame);
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    const state = this.socket.readyState;
    if (state === this.socket.CLOSING || state === this.socket.CLOSED) return;
    try {
      this.socket.close(code, reason);
    } catch {
      // An invalid code or over-long reason must not leave the socket open.
      this.socket.terminate();
      return;
    }
    this.closeTimer = setTimeout(() => this.socket.terminate(), this.closeGraceMs);
    this.closeTimer.unref();
  }

  /** Call `listener` once the socket's write buffer has emptied. */
  onDrain(listener: () => void): () => void {
    // ws keeps its net.Socket private; 'drain' on it is the only signal that buffered bytes went out.
    const raw = (this.socket as unknown as { _socket?: Duplex })._socket;
    if (!raw || this.socket.bufferedAmount === 0) {
      const timer = setTimeout(listener, 0);
      return () => clearTimeout(timer);
    }
    raw.once('drain', listener);
    return () => raw.off('drain', listener);
  }
}
