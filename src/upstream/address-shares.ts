/**
 * Calls in flight per client address group (`addressGroup`: IPv6 by its /64, as per-address
 * connection limits count), at most `max` each. An entry exists only while its group has calls in flight, so the
 * map holds no more entries than there are calls, and nothing needs a timer to forget an address.
 */
export class AddressShares {
  private readonly inFlight = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Address groups with calls in flight (the map's entries). */
  get size(): number {
    return this.inFlight.size;
  }

  /** Calls in flight for `group`. */
  of(group: string): number {
    return this.inFlight.get(group) ?? 0;
  }

  /** True when `group` has `max` calls in flight. */
  isFull(group: string): boolean {
    return this.of(group) >= this.max;
  }

  /** Take one of `group`'s slots: false when it has none left. */
  take(group: string): boolean {
    const held = this.of(group);
    if (held >= this.max) return false;
    this.inFlight.set(group, held + 1);
    return true;
  }

  /** Give back a slot `take` gave; the group's entry goes with its last one. */
  give(group: string): void {
    const held = this.inFlight.get(group);
    if (held === undefined) return;
    if (held <= 1) this.inFlight.delete(group);
    else this.inFlight.set(group, held - 1);
  }
}
