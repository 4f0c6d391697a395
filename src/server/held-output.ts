import type { BudgetLedger, BudgetMember } from '../transport/output-budget.js';

/**
 * The characters of frame text one connection's subscriptions hold back while their history is
 * replayed, as one running total. Each backlog is bounded by its topic's highWaterMark, but a
 * connection that resumes many topics and does not read stalls every replay (each page waits
 * for its socket to drain) and holds all of them at once: they are its output as much as what
 * its socket has queued. So they count with it: toward the node's output budget (a member of
 * its own, reported at each change and shed with its session) and the heartbeat's not-reading
 * check (`maxBufferedBytes`).
 *
 * Made at the connection's first hold (most never hold any); updated only where a backlog grows
 * or shrinks (Delivery.heldChanged), never on the live path.
 */
export class HeldOutput implements BudgetMember {
  /** BudgetMember: what was last reported (the budget's bookkeeping). */
  budgeted = 0;
  private total = 0;

  constructor(
    /** The node's output budget (limits.maxBufferedBytesTotal); undefined: none. */
    private readonly ledger: BudgetLedger | undefined,
  ) {}

  /** Characters held back now. */
  get chars(): number {
    return this.total;
  }

  /** BudgetMember: what the budget's exact count sees. */
  get budgetBytes(): number {
    return this.total;
  }

  /** `chars` more held back (fewer when negative); reported to the budget at once. */
  add(chars: number): void {
    this.total += chars;
    this.ledger?.report(this, this.total);
  }

  /** The connection has gone: nothing it held counts any more. */
  leave(): void {
    this.ledger?.leave(this);
  }
}
