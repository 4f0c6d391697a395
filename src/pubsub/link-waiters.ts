import type { Broker } from './broker.js';

/**
 * How often (ms) the broker's `ready` is looked at while a replay waits for it. `onRelinked`
 * wakes the waiters at once after a reconnect; this catches what it does not tell: a broker
 * that answers again on the same connection (a hung Redis whose health checks pass again), or
 * one without `onRelinked`.
 */
export const LINK_POLL_MS = 250;

/**
 * Everyone on a node waiting for its broker link to be up again (replays whose history read
 * failed while it was down), on one `onRelinked` listener and one timer for all, held only
 * while someone waits.
 */
export class LinkWaiters {
  /** Made when one waits and let go once none does. */
  private listeners: Set<() => void> | undefined;
  private stopRelinked: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly broker: Pick<Broker, 'ready' | 'onRelinked'>,
    private readonly pollMs = LINK_POLL_MS,
  ) {}

  /** Waiting now (for tests). */
  get waiting(): number {
    return this.listeners?.size ?? 0;
  }

  /**
   * Call `listener` once the broker is ready (at the next check: a reconnect, or the next poll;
   * never in this call). Returns a function that cancels.
   */
  wait(listener: () => void): () => void {
    const own = (): void => listener();
    (this.listeners ??= new Set()).add(own);
    if (this.timer === undefined) {
      this.stopRelinked = this.broker.onRelinked?.(() => this.check());
      this.timer = setInterval(() => this.check(), this.pollMs);
      this.timer.unref();
    }
    return () => {
      const listeners = this.listeners;
      if (!listeners?.delete(own) || listeners.size > 0) return;
      this.stop();
    };
  }

  private check(): void {
    if (!this.broker.ready) return;
    const listeners = this.listeners;
    this.stop();
    for (const listener of listeners ?? []) {
      try {
        listener();
      } catch {
        // One waiter's failure is its own; the others are still told.
      }
    }
  }

  private stop(): void {
    this.listeners = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    const stopRelinked = this.stopRelinked;
    this.stopRelinked = undefined;
    stopRelinked?.();
  }
}
