import type { InputBudget, InputLimit, InputReader } from '../transport/ws-transport.js';
import { RateLimit, TokenBucket } from './token-bucket.js';

/**
 * A connection's own limit where it has none, only its address's: a bucket that never runs
 * out (a finite rate, so that no arithmetic on it makes NaN).
 */
export function unboundedLimit(): RateLimit {
  return new RateLimit(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
}

/**
 * The shared bucket of one address group: every connection from the group takes from it as
 * well as from its own. Counted by the connections that hold it; once none does, it is kept
 * until it would be full again, so that closing a connection and opening another (whose own
 * bucket starts full) does not refill it.
 */
export class AddressBudget extends TokenBucket {
  /** The connections holding it. */
  refs = 0;
  /**
   * While no connection holds it: when it is full again (ms, on its limit's clock), and its
   * place in the heap of such entries (-1 while held).
   */
  fullAt = 0;
  slot = -1;

  constructor(
    limit: RateLimit,
    readonly group: string,
  ) {
    super(limit);
  }

  /** Told when a spend through `by` has just put this bucket in debt (PairedBucket.spend). */
  wentIntoDebt?(by: PairedBucket): void;
}

/**
 * The per-address buckets of one limit, by address group. Bounded: at most `maxEntries`
 * (the gateway's maxConnections, so every connection's group fits). An entry lives while
 * connections hold it and, after the last lets go, only until its bucket would be full again:
 * entries no connection holds are kept in a heap by that time and dropped when it has passed,
 * checked whenever an entry is taken or let go (no timer). A new group finding the table full
 * takes the place of the entry nobody holds that is nearest to full; with every entry held
 * (more connections holding entries than maxEntries, only possible for a moment while closed
 * connections let go) it gets none, and its connections have their own budgets only.
 */
export class AddressBudgets<E extends AddressBudget = AddressBudget> {
  private readonly entries = new Map<string, E>();
  /** Entries no connection holds: a min-heap by fullAt. */
  private readonly unheld: E[] = [];

  constructor(
    readonly limit: RateLimit,
    readonly maxEntries: number,
    private readonly make: (group: string) => E,
  ) {}

  /** Entries kept. */
  get size(): number {
    return this.entries.size;
  }

  /** The entry of `group`, if kept (without taking it). */
  peek(group: string): E | undefined {
    return this.entries.get(group);
  }

  /** Hold `group`'s entry for one more connection; undefined when none can be kept. */
  acquire(group: string): E | undefined {
    this.sweep(this.limit.now());
    let entry = this.entries.get(group);
    if (entry === undefined) {
      if (this.entries.size >= this.maxEntries && !this.evictNearestFull()) return undefined;
      entry = this.make(group);
      this.entries.set(group, entry);
    } else if (entry.slot >= 0) {
      this.removeAt(entry.slot);
    }
    entry.refs++;
    return entry;
  }

  /** A connection that held `entry` let go of it (once per acquire). */
  release(entry: E): void {
    if (entry.refs <= 0) return;
    const now = this.limit.now();
    if (--entry.refs === 0 && this.entries.get(entry.group) === entry) {
      const ms = entry.msUntilFull();
      if (ms <= 0) this.entries.delete(entry.group);
      else {
        entry.fullAt = now + ms;
        this.push(entry);
      }
    }
    this.sweep(now);
  }

  /** Drop the entries nobody holds whose buckets are full by `now`. */
  private sweep(now: number): void {
    const unheld = this.unheld;
    while (unheld.length > 0 && unheld[0]!.fullAt <= now) this.drop(unheld[0]!);
  }

  private evictNearestFull(): boolean {
    const nearest = this.unheld[0];
    if (nearest === undefined) return false;
    this.drop(nearest);
    return true;
  }

  private drop(entry: E): void {
    this.removeAt(entry.slot);
    this.entries.delete(entry.group);
  }

  // The heap of unheld entries, by fullAt; each entry knows its slot, so one taken again is
  // removed from the middle in O(log n).

  private push(entry: E): void {
    entry.slot = this.unheld.length;
    this.unheld.push(entry);
    this.up(entry.slot);
  }

  private removeAt(slot: number): void {
    const unheld = this.unheld;
    const removed = unheld[slot]!;
    const last = unheld.pop()!;
    removed.slot = -1;
    if (last === removed) return;
    unheld[slot] = last;
    last.slot = slot;
    this.down(slot);
    this.up(last.slot);
  }

  private up(slot: number): void {
    const unheld = this.unheld;
    const entry = unheld[slot]!;
    while (slot > 0) {
      const parentSlot = (slot - 1) >> 1;
      const parent = unheld[parentSlot]!;
      if (parent.fullAt <= entry.fullAt) break;
      unheld[slot] = parent;
      parent.slot = slot;
      slot = parentSlot;
    }
    unheld[slot] = entry;
    entry.slot = slot;
  }

  private down(slot: number): void {
    const unheld = this.unheld;
    const entry = unheld[slot]!;
    for (;;) {
      let child = 2 * slot + 1;
      if (child >= unheld.length) break;
      if (child + 1 < unheld.length && unheld[child + 1]!.fullAt < unheld[child]!.fullAt) child++;
      const smaller = unheld[child]!;
      if (smaller.fullAt >= entry.fullAt) break;
      unheld[slot] = smaller;
      smaller.slot = slot;
      slot = child;
    }
    unheld[slot] = entry;
    entry.slot = slot;
  }
}

/**
 * A connection's bucket of a limit that also has a per-address bucket: what it takes or spends
 * comes out of both. Both are refilled from one reading of the connection's limit's clock (once
 * per message or call, not once per bucket): the address's limit must read the same clock.
 */
export class PairedBucket extends TokenBucket {
  constructor(
    limit: RateLimit,
    readonly address: AddressBudget,
    /** Told when another connection's spend puts the address in debt (AddressInput). */
    readonly reader?: InputReader,
  ) {
    super(limit);
  }

  /**
   * Take a token from both buckets, or from neither: which was empty ('connection' first), or
   * undefined when taken.
   */
  takeBoth(): 'connection' | 'address' | undefined {
    const clock = this.limit.now();
    if (this.availableAt(clock) < 1) return 'connection';
    if (this.address.availableAt(clock) < 1) return 'address';
    this.takeAt(clock);
    this.address.takeAt(clock);
    return undefined;
  }

  /** Spend from both (TokenBucket.spend): the longer of the two waits. */
  override spend(amount: number): number {
    const clock = this.limit.now();
    const own = this.spendAt(amount, clock);
    const address = this.address;
    const shared = address.spendAt(amount, clock);
    // In debt, and not before this spend (its refill is done: no second one at the same clock).
    if (shared > 0 && address.availableAt(clock) + amount >= 0) address.wentIntoDebt?.(this);
    return own > shared ? own : shared;
  }
}

/**
 * An address group's byte budget as WsTransport takes it (an InputLimit): the connections of
 * the group share it, each budget it makes pairs the connection's own bucket with the group's,
 * and each connection lets go of it as it closes.
 */
class AddressInput extends AddressBudget implements InputLimit {
  /**
   * The budgets of the group's connections that stop reading when another puts the group's
   * budget in debt (InputReader), until each closes. Made with the first of them.
   */
  private readers: Set<PairedBucket> | undefined = undefined;

  constructor(
    limit: RateLimit,
    group: string,
    private readonly table: AddressInputLimits,
  ) {
    super(limit, group);
  }

  budget(reader?: InputReader): InputBudget {
    if (reader === undefined) return new PairedBucket(this.table.own, this);
    const budget = new ReaderBudget(this.table.own, this, reader);
    (this.readers ??= new Set()).add(budget);
    return budget;
  }

  /** Every other reader of the group stops reading until the group's budget has refilled. */
  override wentIntoDebt(by: PairedBucket): void {
    const readers = this.readers;
    if (readers === undefined) return;
    for (const budget of readers) if (budget !== by) budget.reader!.sharedBudgetInDebt();
  }

  /** `budget`'s connection has closed. */
  forget(budget: PairedBucket): void {
    this.readers?.delete(budget);
  }

  release(): void {
    this.table.release(this);
  }
}

/** A PairedBucket of AddressInput's with a reader: forgotten by the group once closed. */
class ReaderBudget extends PairedBucket {
  constructor(
    limit: RateLimit,
    override readonly address: AddressInput,
    reader: InputReader,
  ) {
    super(limit, address, reader);
  }

  close(): void {
    this.address.forget(this);
  }
}

/**
 * limits.bytesPerSecond with bytesPerSecondPerIp: each WebSocket connection holds its address
 * group's AddressInput from its opening to its close.
 */
export class AddressInputLimits extends AddressBudgets<AddressInput> {
  constructor(
    /** A connection's own limit (unboundedLimit when it has none). */
    readonly own: RateLimit,
    perAddress: RateLimit,
    maxEntries: number,
  ) {
    super(perAddress, maxEntries, (group) => new AddressInput(perAddress, group, this));
  }
}
