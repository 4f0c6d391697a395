import type { ServerResponse } from 'node:http';
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

/**
 * A POST /rpc reply written and not yet taken by its client, as the budget counts it: what Node
 * holds of it for the socket (`writableLength`; the kernel's buffers are not counted). Past the
 * budget its socket is destroyed: a client that does not read its replies would otherwise hold
 * them on the node for as long as it keeps the socket open, one reply on each socket it has.
 */
export class ReplyWriting extends BodyReading {
  constructor(
    ledger: BudgetLedger,
    remoteAddress: string | undefined,
    private readonly res: ServerResponse,
  ) {
    super(ledger, remoteAddress);
  }

  override get budgetBytes(): number {
    return this.stopped.aborted || this.res.writableFinished ? 0 : this.res.writableLength;
  }

  override stop(): void {
    super.stop();
    this.res.destroy();
  }
}

/** The POST /rpc bodies being read on the node, each counted toward its budget while it is. */
export class BodyReadings {
  readonly #reading = new Set<BodyReading>();
  /** The replies counted, by response: a reply written in chunks is told again after each. */
  readonly #replies = new WeakMap<ServerResponse, ReplyWriting>();

  constructor(private readonly ledger: BudgetLedger) {}

  /** A body starts being read. */
  start(remoteAddress: string | undefined): BodyReading {
    const reading = new BodyReading(this.ledger, remoteAddress);
    this.#reading.add(reading);
    return reading;
  }

  /**
   * `res` has been written to (its reply whole, or its next chunk): what of it its socket has not
   * taken counts until it has (`finish`) or the socket closes, told again at each call.
   */
  replied(res: ServerResponse, remoteAddress: string | undefined): void {
    if (res.writableFinished || res.destroyed) return;
    const counted = this.#replies.get(res);
    if (counted !== undefined) {
      if (this.#reading.has(counted)) this.ledger.report(counted, counted.budgetBytes);
      return;
    }
    const writing = new ReplyWriting(this.ledger, remoteAddress, res);
    this.#replies.set(res, writing);
    this.#reading.add(writing);
    const end = (): void => {
      res.off('finish', end);
      res.off('close', end);
      this.end(writing);
    };
    res.once('finish', end);
    res.once('close', end);
    this.ledger.report(writing, writing.budgetBytes);
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
