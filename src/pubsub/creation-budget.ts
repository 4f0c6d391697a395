/*
 * How many topics a broker may create on this node per second: the NATS streams and Redis keys
 * a topic's first publish makes. A token bucket, refilled from the clock when asked, so an idle
 * node costs nothing. Subscribes and history reads create nothing and take nothing from it.
 */

/** A node's budget of new broker topics (options of the Redis and NATS brokers). */
export interface TopicCreationBudget {
  /** New topics per second on average; 0 turns the bound off. Default 100. */
  newTopicsPerSecond?: number;
  /** How many may be created at once before the rate applies. Default 1 000. */
  newTopicsBurst?: number;
}

export const defaultTopicCreation = { newTopicsPerSecond: 100, newTopicsBurst: 1_000 };

export class CreationBudget {
  readonly perSecond: number;
  private readonly burst: number;
  private tokens: number;
  private last: number;

  constructor(
    options: TopicCreationBudget = {},
    // Monotonic: a wall clock stepped back (NTP, a VM restored) would put the budget in debt
    // for as long as the step.
    private readonly now: () => number = () => performance.now(),
  ) {
    this.perSecond = options.newTopicsPerSecond ?? defaultTopicCreation.newTopicsPerSecond;
    this.burst = options.newTopicsBurst ?? defaultTopicCreation.newTopicsBurst;
    for (const [name, value] of [
      ['newTopicsPerSecond', this.perSecond],
      ['newTopicsBurst', this.burst],
    ] as const) {
      if (!(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
        throw new RangeError(`${name} must be a finite number at least 0, not ${String(value)}`);
      }
    }
    this.tokens = this.burst;
    this.last = now();
  }

  /** True when the bound is off (`newTopicsPerSecond: 0`). */
  get unbounded(): boolean {
    return this.perSecond === 0;
  }

  /** Whether a topic may be created now (without spending anything). */
  available(): boolean {
    if (this.unbounded) return true;
    this.refill();
    return this.tokens >= 1;
  }

  /**
   * A topic was created: spend one. Creations that were allowed together may take the budget
   * below zero (by no more than were under way at once); it refills from there.
   */
  spend(): void {
    if (this.unbounded) return;
    this.refill();
    this.tokens--;
  }

  private refill(): void {
    const now = this.now();
    // A clock read earlier than the last (an injected one going back): no time passed.
    if (now <= this.last) {
      this.last = now;
      return;
    }
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.perSecond) / 1000);
    this.last = now;
  }
}
