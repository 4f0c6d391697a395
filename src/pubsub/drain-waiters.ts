import type { Sink } from './sink.js';

/**
 * Everyone on one connection waiting for its socket to drain (its replays), on one drain
 * listener of the socket rather than one each: a connection's many resumes add one listener.
 */
export class DrainWaiters {
  private readonly listeners = new Set<() => void>();
  private cancel: (() => void) | undefined;

  constructor(private readonly sink: Sink) {}

  /** Call `listener` once the socket has drained; returns a function that cancels. */
  wait(listener: () => void): () => void {
    this.listeners.add(listener);
    this.cancel ??= this.sink.onDrain(() => this.drained());
    return () => {
      if (!this.listeners.delete(listener) || this.listeners.size > 0) return;
      const cancel = this.cancel;
      this.cancel = undefined;
      cancel?.();
    };
  }

  private drained(): void {
    this.cancel = undefined;
    const listeners = [...this.listeners];
    this.listeners.clear();
    for (const listener of listeners) listener();
  }
}
