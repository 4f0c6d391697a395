/**
 * What a connection tells an OutputBudget: the bytes it has queued for its peer. A transport
 * holds its own share (one number) so that reporting costs no lookup.
 */
export interface BudgetMember {
  /** What this connection last reported: the budget's bookkeeping, not to be set by anyone else. */
  budgeted: number;
  /**
   * Bytes queued for the peer now, and what the connection holds of its peer's messages read
   * but not yet handled (WsTransport); 0 once the connection is closing (its buffers go with it).
   */
  readonly budgetBytes: number;
}

/** What a transport reports to: the budget as its members see it. */
export interface BudgetLedger {
  /** `member` has `bytes` queued now. */
  report(member: BudgetMember, bytes: number): void;
  /** `member` is closing or closed: what it queued no longer counts. */
  leave(member: BudgetMember): void;
  /**
   * `member` is closing but holds what it queued until it ends (`leave`) or `stop` is called:
   * it still counts, and while the total is over the limit it is stopped, as an open
   * connection is shed. For a close that may wait long for its peer to read (a half-closed
   * TCP peer: until endOfInputDeadlineMs), where one that ends soon just leaves.
   */
  closing?(member: BudgetMember, stop: () => void): void;
}

/** Is `transport` one that reports to an OutputBudget? */
export function isBudgetMember(transport: object): transport is BudgetMember {
  return 'budgeted' in transport;
}

/**
 * The node-wide budget for output queued to peers (`limits.maxBufferedBytesTotal`): each
 * connection may queue up to `maxBufferedBytes`, and many connections that stop reading could
 * together queue far more than the process can hold (10 000 × 4 MiB = 40 GiB).
 *
 * Tracked cheaply: a running total, updated where transports already look at their queued
 * bytes (each send, each back-pressure check). Bytes leaving a queue are seen only when that
 * connection next reports, so the running total can run high, never low. When it passes the
 * limit, a check at the end of the turn counts every connection exactly; if the exact total is
 * still over, the connections holding the most are closed (`shed`, 1013 Try Again Later),
 * largest first, until the total is back within the limit. Closing is what frees memory: a
 * peer that does not read holds its queue however long reading from it is paused.
 *
 * An entry may hold output besides its transport's (`extraOf`: a connection's subscriptions'
 * replay backlogs, HeldOutput; what it holds while its identity waits for a renewal,
 * OutputHold), members of their own that report to the same ledger: the exact count weighs the
 * entry by them all together, and shedding it takes them all.
 */
export class OutputBudget<E> implements BudgetLedger {
  private total = 0;
  private checkScheduled = false;
  /** Members closing that still hold their queues, and how to stop each (see `closing`). */
  private readonly closingMembers = new Map<BudgetMember, () => void>();

  constructor(
    /** Bytes all connections together may queue; 0 turns the budget off. */
    readonly limit: number,
    /** Every open connection, for the exact count. */
    private readonly entries: () => Iterable<E>,
    /** The transport of an entry, when it reports to the budget. */
    private readonly memberOf: (entry: E) => BudgetMember | undefined,
    /** Close an entry to bring the total down (the caller closes with 1013 and logs). */
    private readonly shed: (entry: E, queuedBytes: number) => void,
    /** What else an entry holds as its own output, when anything. */
    private readonly extraOf?: (entry: E) => readonly (BudgetMember | undefined)[] | undefined,
  ) {}

  /** The running total: at least what is queued now (it learns of drained bytes late). */
  get bytes(): number {
    return this.total;
  }

  /** `member` has `bytes` queued now. O(1); past the limit, an exact check runs at the end of the turn. */
  report(member: BudgetMember, bytes: number): void {
    this.total += bytes - member.budgeted;
    member.budgeted = bytes;
    if (this.total > this.limit && this.limit > 0 && !this.checkScheduled) {
      this.checkScheduled = true;
      setImmediate(this.check);
    }
  }

  /** `member` is closing or closed: what it queued no longer counts. */
  leave(member: BudgetMember): void {
    this.closingMembers.delete(member);
    this.total -= member.budgeted;
    member.budgeted = 0;
  }

  closing(member: BudgetMember, stop: () => void): void {
    this.closingMembers.set(member, stop);
    this.report(member, member.budgetBytes);
  }

  /** Count every connection exactly and, while over the limit, shed the largest queues. */
  private readonly check = (): void => {
    this.checkScheduled = false;
    const queued: {
      entry: E | undefined;
      member: BudgetMember | undefined;
      extra: readonly (BudgetMember | undefined)[] | undefined;
      bytes: number;
      stop?: () => void;
    }[] = [];
    let total = 0;
    for (const entry of this.entries()) {
      const member = this.memberOf(entry);
      const extra = this.extraOf?.(entry);
      let bytes = recount(member);
      if (extra) for (const other of extra) bytes += recount(other);
      total += bytes;
      if (bytes > 0) queued.push({ entry, member, extra, bytes });
    }
    for (const [member, stop] of this.closingMembers) {
      const bytes = recount(member);
      total += bytes;
      if (bytes > 0) queued.push({ entry: undefined, member, extra: undefined, bytes, stop });
    }
    this.total = total;
    if (total <= this.limit) return;
    queued.sort((a, b) => b.bytes - a.bytes);
    for (const { entry, member, extra, bytes, stop } of queued) {
      if (this.total <= this.limit) break;
      if (stop) stop();
      else {
        this.shed(entry!, bytes);
        // Shed into a close that would hold its queue a while yet: over the budget, cut now.
        if (member) this.closingMembers.get(member)?.();
      }
      if (member) this.leave(member);
      if (extra) for (const other of extra) if (other) this.leave(other);
    }
  };
}

/** What `member` holds now, noted as what it last reported (the exact count); 0 for none. */
function recount(member: BudgetMember | undefined): number {
  if (!member) return 0;
  const bytes = member.budgetBytes;
  member.budgeted = bytes;
  return bytes;
}
