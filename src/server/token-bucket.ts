/**
 * The buckets' clock unless one is given: milliseconds that only go forward. The wall clock
 * (Date.now) steps back when NTP corrects it or a VM is restored, and a bucket refilled from it
 * would count the step as debt: every bucket of the process refusing, or pausing its reads, for
 * as long as the step. So a reading earlier than the last counts as no time passed: the step is
 * added to every later reading. Date.now rather than performance.now(), which only goes forward
 * but costs three times as much to read, and a bucket is read for every message.
 */
export function monotonicMs(): number {
  const wall = Date.now();
  if (wall < lastWall) stepsBack += lastWall - wall;
  lastWall = wall;
  return wall + stepsBack;
}

/** Date.now's last reading (monotonicMs), and the steps back it took in all. */
let lastWall = Date.now();
let stepsBack = 0;

/**
 * `ms` as a small integer (a Smi, stored in the object itself) when it is an int32: an integral
 * result of arithmetic on a clock's reading is a heap number until `| 0` makes it one, and a
 * field that once held a heap number boxes every value stored in it after.
 */
export function smallMs(ms: number): number {
  const small = ms | 0;
  return small === ms ? small : ms;
}

/**
 * What every bucket of one limit shares: its rate, its burst, its clock, and the time the
 * buckets count from.
 */
export class RateLimit {
  /** The clock's reading when this was made: a bucket keeps its time as an offset from it. */
  readonly origin: number;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    readonly now: () => number = monotonicMs,
  ) {
    this.origin = now();
  }
}

/**
 * A per-connection rate limit: `burst` tokens, refilled at `perSecond`. Each
 * incoming request or notification takes one; the refill is computed from the
 * clock when a token is asked for, so an idle connection costs nothing.
 *
 * A gateway holds one per connection, so the bucket keeps only its own state (tokens, and the
 * time of the last refill as milliseconds since the limit's origin: for the first 24 days of a
 * limit a small integer, stored in the object itself where an epoch time takes a heap number of
 * its own) and shares the
 * rest (RateLimit).
 */
export class TokenBucket {
  protected readonly limit: RateLimit;
  private tokens: number;
  private last: number;

  /** A bucket of a shared limit (a RateLimit). */
  constructor(limit: {
    readonly perSecond: number;
    readonly burst: number;
    readonly now: () => number;
    readonly origin: number;
  });
  /** A bucket with a limit of its own. */
  constructor(perSecond: number, burst: number, now?: () => number);
  constructor(perSecond: number | RateLimit, burst = 0, now: () => number = monotonicMs) {
    const limit = typeof perSecond === 'number' ? new RateLimit(perSecond, burst, now) : perSecond;
    this.limit = limit;
    this.tokens = limit.burst;
    this.last = smallMs(limit.now() - limit.origin);
  }

  take(): boolean {
    return this.takeAt(this.limit.now());
  }

  /**
   * take() at `clock`, a reading of the limit's clock: a caller that works on several buckets
   * of one clock reads it once for all of them.
   */
  takeAt(clock: number): boolean {
    this.refill(clock);
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  /**
   * Take `amount` tokens however many are left, the bucket going into debt: for what cannot be
   * refused, only slowed (bytes already read). Returns the ms until the refill has paid the
   * debt, 0 when there is none.
   */
  spend(amount: number): number {
    return this.spendAt(amount, this.limit.now());
  }

  /** spend() at `clock`, a reading of the limit's clock (see takeAt). */
  spendAt(amount: number, clock: number): number {
    this.refill(clock);
    this.tokens -= amount;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.limit.perSecond);
  }

  /** The tokens there are now (negative while in debt). */
  available(): number {
    return this.availableAt(this.limit.now());
  }

  /** available() at `clock`, a reading of the limit's clock (see takeAt). */
  availableAt(clock: number): number {
    this.refill(clock);
    return this.tokens;
  }

  /**
   * The Retry-After, in whole seconds and at least 1, of a refusal for want of `amount` tokens
   * (one unless given): when the refill gives them.
   */
  retryAfterSeconds(amount = 1): number {
    return Math.max(1, Math.ceil((amount - this.available()) / this.limit.perSecond));
  }

  /**
   * The whole ms until the bucket is full, rounded down: it is full within a millisecond of
   * that (what stays empty of it is less than `perSecond / 1000` tokens). 0 when full.
   */
  msUntilFull(): number {
    this.refill(this.limit.now());
    const { burst, perSecond } = this.limit;
    return Math.floor(((burst - this.tokens) * 1000) / perSecond);
  }

  /**
   * Add what the time since the last refill gives. A clock that went back (a given one: the
   * default never does) counts as no time passed, and the refill goes on from its new reading:
   * a step back must not put the bucket in debt for its length.
   */
  private refill(clock: number): void {
    const limit = this.limit;
    const now = smallMs(clock - limit.origin);
    const elapsed = now - this.last;
    if (elapsed === 0) return;
    if (elapsed > 0) {
      this.tokens = Math.min(limit.burst, this.tokens + (elapsed * limit.perSecond) / 1000);
    }
    this.last = now;
  }
}
