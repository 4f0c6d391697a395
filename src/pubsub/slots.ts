/**
 * At most `size` holders at once; the others wait their turn, first come first served. A
 * waiting turn can be given up (the subscription it was for has ended) without ever running.
 */
export class Slots {
  private used = 0;
  /**
   * Waiting turns in arrival order (a Set keeps insertion order and deletes in O(1)); made when
   * a turn has to wait and let go once none does: a connection keeps its slots for life, and
   * an empty Set's table would outweigh them.
   */
  private queue: Set<() => void> | undefined;

  constructor(readonly size: number) {}

  /** Holders now. */
  get inUse(): number {
    return this.used;
  }

  /** Turns waiting. */
  get waiting(): number {
    return this.queue?.size ?? 0;
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
    if (this.used < this.size && this.queue === undefined) {
      turn();
      return () => undefined;
    }
    (this.queue ??= new Set()).add(turn);
    return () => this.dequeue(turn);
  }

  private dequeue(turn: () => void): void {
    const queue = this.queue;
    if (queue?.delete(turn) && queue.size === 0) this.queue = undefined;
  }

  private next(): void {
    while (this.used < this.size && this.queue !== undefined) {
      const [turn] = this.queue;
      this.dequeue(turn!);
      turn!();
    }
  }
}
