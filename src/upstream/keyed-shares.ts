/**
 * Calls in flight per key, at most `max` each: a client address group (`addressGroup`: IPv6 by
 * its /64, as per-address connection limits count) or a user. An entry exists only while its key
 * has calls in flight, so the map holds no more entries than there are calls, and nothing needs a
 * timer to forget an address or a user.
 */
export class KeyedShares {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Keys with calls in flight (the map's entries). */
  get size(): number {
    return this.inFlight.size;
  }

  /** Calls in flight for `key`. */
  of(key: string): number {
    return this.inFlight.get(key) ?? 0;
  }

  /** True when `key` has `max` calls in flight. */
  isFull(key: string): boolean {
    return this.of(key) >= this.max;
  }

  /** Take one of `key`'s slots: false when it has none left. */
  take(key: string): boolean {
    const held = this.of(key);
    if (held >= this.max) return false;
    this.inFlight.set(key, held + 1);
    return true;
  }

  /** Give back a slot `take` gave; the key's entry goes with its last one. */
  give(key: string): void {
    const held = this.inFlight.get(key);
    if (held === undefined) return;
    if (held <= 1) this.inFlight.delete(key);
    else this.inFlight.set(key, held - 1);
  }
}
