/**
 * A per-connection rate limit: `burst` tokens, refilled at `perSecond`. Each
 * incoming request or notification takes one; the refill is computed from the
 * clock when a token is asked for, so an idle connection costs nothing.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  take(): boolean {
    const now = this.now();
    if (now !== this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.perSecond) / 1000);
      this.last = now;
    }
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}
