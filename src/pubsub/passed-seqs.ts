import { Fifo } from './fifo.js';

/**
 * The seqs a subscription passed by (published `except` its session) while something was held
 * or replayed, oldest first, waiting to be accounted for by the next message written: at most
 * `max` (beyond, the oldest are forgotten, and so count as missed, never as lost silently).
 * `push` is O(1); `take` looks at the seqs only when one may be at or below the message's.
 */
export class PassedSeqs {
  private readonly seqs = new Fifo<number>();
  /** At most the smallest seq held (exact after `take`; forgetting the oldest may leave it lower). */
  private min = Number.POSITIVE_INFINITY;

  constructor(private readonly max: number) {}

  get length(): number {
    return this.seqs.length;
  }

  push(seq: number): void {
    this.seqs.push(seq);
    if (seq < this.min) this.min = seq;
    if (this.seqs.length > this.max) this.seqs.shift();
  }

  /**
   * How many seqs passed by lie between `lastSeq` (the last accounted for) and `seq`, the
   * message about to be written; forgets those up to `seq`, keeping the later ones in order.
   */
  take(seq: number, lastSeq: number): number {
    // Every seq held is later than this message's: none to count, none to forget.
    if (seq < this.min) return 0;
    // A seq can be passed by twice (its live copy, and its copy in a replay's history): counted once.
    const counted = new Set<number>();
    let min = Number.POSITIVE_INFINITY;
    this.seqs.retain((passed) => {
      if (passed > seq) {
        if (passed < min) min = passed;
        return true;
      }
      // NaN (an unknown position) compares false: every seq below the message's counts then.
      if (passed < seq && !(passed <= lastSeq)) counted.add(passed);
      return false;
    });
    this.min = min;
    return counted.size;
  }
}
