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

/** One thing an OutputHold keeps: a frame, a notification or a call, in the order they came. */
interface HeldEntry {
  /** Characters it holds (a frame's text, a message's params as JSON). */
  readonly chars: number;
  /** What wrote it, when it may be given up on its own (`OutputHold.discard`). */
  readonly owner?: object;
  /** Send it: the hold is released. */
  send(): void;
  /** It will never be sent (the hold is given up): a call is rejected with `error`. */
  drop(error: Error): void;
}

/**
 * A session's output held back while its expired identity waits for a renewal being checked
 * (docs/identity.md, Refresh and expiry): what its subscriptions, `notify` and `call` would send,
 * in order. Released whole once a new token is accepted; given up when the connection closes or
 * past `maxChars` (then `overflow`). Made only for such a wait, so sessions hold none otherwise.
 * It is its connection's output as much as what the socket has queued: a member of the node's
 * output budget (limits.maxBufferedBytesTotal), reported at each change and left once ended.
 */
export class OutputHold implements BudgetMember {
  /** BudgetMember: what was last reported (the budget's bookkeeping). */
  budgeted = 0;
  private entries: HeldEntry[] = [];
  private total = 0;
  /** Waits for the session's socket to drain, which start only once the output is released. */
  private drains: { start: () => () => void; cancel: (() => void) | undefined }[] = [];
  private ended = false;

  constructor(
    /** Characters it may hold; one more entry past them gives it up (`overflow`). */
    private readonly maxChars: number,
    /** Past `maxChars`: the hold has given up what it held; the owner closes the connection. */
    private readonly overflow: () => void,
    /** The node's output budget; undefined: none. */
    private readonly ledger?: BudgetLedger,
  ) {}

  /** Characters held now: counted as the session's output not yet sent (its bufferedAmount). */
  get chars(): number {
    return this.total;
  }

  /** BudgetMember: what the budget's exact count sees. */
  get budgetBytes(): number {
    return this.total;
  }

  /** Keep `entry` until the release; past the bound, give up everything held. */
  keep(entry: HeldEntry): void {
    if (this.ended) return;
    this.entries.push(entry);
    this.total += entry.chars;
    this.ledger?.report(this, this.total);
    if (this.total > this.maxChars) this.overflow();
  }

  /**
   * Wait for the socket to drain from the release on (`start` begins the wait); returns the
   * cancel. A drain before the release means nothing: what is held has not been written.
   */
  onRelease(start: () => () => void): () => void {
    const drain = { start, cancel: undefined as (() => void) | undefined };
    this.drains.push(drain);
    return () => {
      const at = this.drains.indexOf(drain);
      if (at >= 0) this.drains.splice(at, 1);
      drain.cancel?.();
    };
  }

  /** Give up what `owner` wrote, the rest kept in order (those entries have nothing to reject). */
  discard(owner: object): void {
    if (this.ended) return;
    const kept: HeldEntry[] = [];
    for (const entry of this.entries) {
      if (entry.owner === owner) this.total -= entry.chars;
      else kept.push(entry);
    }
    this.entries = kept;
    this.ledger?.report(this, this.total);
  }

  /** Send everything held, in order, then start the drain waits. */
  release(): void {
    if (this.ended) return;
    this.ended = true;
    const entries = this.entries;
    this.entries = [];
    this.total = 0;
    this.ledger?.leave(this);
    for (const entry of entries) entry.send();
    const drains = this.drains;
    this.drains = [];
    for (const drain of drains) drain.cancel = drain.start();
  }

  /** Send nothing of it: calls held are rejected with `error`, drain waits never start. */
  giveUp(error: Error): void {
    if (this.ended) return;
    this.ended = true;
    const entries = this.entries;
    this.entries = [];
    this.total = 0;
    this.ledger?.leave(this);
    this.drains = [];
    for (const entry of entries) entry.drop(error);
  }
}
