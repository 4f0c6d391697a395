import type { Sink } from './sink.js';

/**
 * Everyone on one connection waiting for its socket to drain (its replays), on one drain
 * listener of the socket rather than one each: a connection's many resumes add one listener.
 */
export class DrainWaiters {
  /**
   * Made when one waits and let go once none does: a connection keeps its DrainWaiters for
   * life, and an empty Set's table would outweigh it.
   */
  private listeners: Set<() => void> | undefined;
  private cancel: (() => void) | undefined;

  constructor(private readonly sink: Sink) {}

  /** Call `listener` once the socket has drained; returns a function that cancels. */
  wait(listener: () => void): () => void {
    (this.listeners ??= new Set()).add(listener);
    this.cancel ??= this.sink.onDrain(() => this.drained());
    return () => {
      const listeners = this.listeners;
      if (!listeners?.delete(listener) || listeners.size > 0) return;
      this.listeners = undefined;
      const cancel = this.cancel;
      this.cancel = undefined;
      cancel?.();
    };
  }

  private drained(): void {
    const listeners = this.listeners;
    this.listeners = undefined;
    this.cancel = undefined;
    if (listeners) for (const listener of listeners) listener();
  }
}
