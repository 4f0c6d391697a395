import type { BudgetLedger, BudgetMember } from '../transport/output-budget.js';

/**
 * A POST /rpc body being read, as the node-wide budget (limits.maxBufferedBytesTotal) counts it:
 * the bytes read so far. An exchange has no connection the budget could close to get its bytes
 * back, so past the budget its reading stops instead (`stopped` aborts) and the POST is answered
 * 503 with Retry-After, the rest of its body unread.
 */
export class BodyReading implements BudgetMember {
  budgeted = 0;
  #bytes = 0;
  readonly #stop = new AbortController();

  constructor(
    private readonly ledger: BudgetLedger,
    /** The client's address (after trusted proxies), for the log line of a refusal. */
    readonly remoteAddress: string | undefined,
  ) {}

  /** Aborted once the budget has stopped this reading. */
  get stopped(): AbortSignal {
    return this.#stop.signal;
  }

  get budgetBytes(): number {
    return this.#stop.signal.aborted ? 0 : this.#bytes;
  }

  /** `bytes` of the body have been read so far. */
  read(bytes: number): void {
    if (this.#stop.signal.aborted) return;
    this.#bytes = bytes;
    this.ledger.report(this, bytes);
  }

  /** Over the budget: stop reading (what was read is let go with the request). */
  stop(): void {
    this.#stop.abort();
  }
}

/** The POST /rpc bodies being read on the node, each counted toward its budget while it is. */
export class BodyReadings {
  readonly #reading = new Set<BodyReading>();

  constructor(private readonly ledger: BudgetLedger) {}

  /** A body starts being read. */
  start(remoteAddress: string | undefined): BodyReading {
    const reading = new BodyReading(this.ledger, remoteAddress);
    this.#reading.add(reading);
    return reading;
  }

  /** Its reading is over (read, refused, stopped or its client gone): it no longer counts. */
  end(reading: BodyReading): void {
    this.#reading.delete(reading);
    this.ledger.leave(reading);
  }

  values(): IterableIterator<BodyReading> {
    return this.#reading.values();
  }
}
