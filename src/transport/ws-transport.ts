import type { RawData, WebSocket } from 'ws';
import { CloseCode } from './transport.js';
import type { Transport, TransportListener } from './transport.js';

function toText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/** Server-side adapter over a `ws` WebSocket. Binary frames are read as UTF-8 text. */
export class WsTransport implements Transport {
  private listener: TransportListener | undefined;
  private early: string[] = [];

  constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      const text = toText(data);
      if (this.listener) this.listener.message(text);
      else this.early.push(text);
    });
    socket.on('close', (code, reason) => this.listener?.close(code, reason.toString('utf8')));
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
    }
  }
}
