/**
 * At most `size` holders at once; the others wait their turn, first come first served. A
 * waiting turn can be given up (the subscription it was for has ended) without ever running.
 */
export class Slots {
  private used = 0;
  /** Waiting turns in arrival order (a Set keeps insertion order and deletes in O(1)). */
  private readonly queue = new Set<() => void>();

  constructor(readonly size: number) {}

  /** Holders now. */
  get inUse(): number {
    return this.used;
  }

  /** Turns waiting. */
  get waiting(): number {
    return this.queue.size;
  }

  /**
   * Call `granted` with a release function once a slot is free (at once when one is). Returns
   * a function that gives up the turn while it waits (and does nothing once it was granted:
   * the holder releases with what `granted` got). Releasing twice is harmless.
   */
  take(granted: (release: () => void) => void): () => void {
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.used--;
      this.next();
    };
    const turn = (): void => {
      this.used++;
      granted(release);
    };
    if (this.used < this.size && this.queue.size === 0) {
      turn();
      return () => undefined;
    }
    this.queue.add(turn);
    return () => {
      this.queue.delete(turn);
    };
  }

  private next(): void {
    while (this.used < this.size && this.queue.size > 0) {
      const [turn] = this.queue;
      this.queue.delete(turn!);
      turn!();
    }
  }
}
