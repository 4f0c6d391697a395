import { CloseCode } from './transport.js';
import type { Transport, TransportListener } from './transport.js';

/**
 * Two transports wired to each other, for tests and in-process use. Frames are
 * delivered on a later microtask, as a socket would, never re-entrantly.
 */
export function createInMemoryPair(): [InMemoryTransport, InMemoryTransport] {
  const a = new InMemoryTransport();
  const b = new InMemoryTransport();
  a.remote = b;
  b.remote = a;
  return [a, b];
}

export class InMemoryTransport implements Transport {
  remote: InMemoryTransport | undefined;
  /** Every frame this side sent, for assertions in tests. */
  readonly sent: string[] = [];
  private listener: TransportListener | undefined;
  private early: string[] = [];
  private closed = false;

  get bufferedAmount(): number {
    return 0;
  }

  listen(listener: TransportListener): void {
    this.listener = listener;
    const early = this.early;
    this.early = [];
    for (const text of early) listener.receive(text);
  }

  send(frame: string): void {
    if (this.closed) return;
    this.sent.push(frame);
    const remote = this.remote;
    queueMicrotask(() => remote?.deliver(frame));
  }

  close(code: number = CloseCode.Normal, reason = ''): void {
    if (this.closed) return;
    this.closed = true;
    const remote = this.remote;
    queueMicrotask(() => {
      this.listener?.transportClosed(code, reason);
      remote?.remoteClosed(code, reason);
    });
  }

  private deliver(text: string): void {
    if (this.closed) return;
    if (this.listener) this.listener.receive(text);
    else this.early.push(text);
  }

  private remoteClosed(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.listener?.transportClosed(code, reason);
  }
}
