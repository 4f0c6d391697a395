import type { Broker, History } from './broker.js';
import { LinkWaiters } from './link-waiters.js';
import { Slots } from './slots.js';

/** One broker read and everyone waiting for it. */
interface SharedRead {
  readonly key: string;
  readonly waiters: Set<(error: unknown, history?: History) => void>;
  /** Set once the read was sent to the broker: the `sent` count it took. */
  sentAt: number | undefined;
  /** Gives up the node slot this read waits for (while it has not been sent). */
  cancelTurn: (() => void) | undefined;
}

/**
 * A node's history reads (resume replays): at most `maxConcurrent` broker reads at once, the
 * others waiting their turn, and identical reads (same topic, after the same seq, same page
 * size) made at the same time done once and shared. Sharing is only with a read sent after
 * the reader's `mark` (or not sent yet), so a subscriber never gets an answer older than its
 * own start: a read that began before it joined the topic could end before messages it holds
 * back, and those would look lost.
 */
export class HistoryReads {
  private readonly slots: Slots;
  private readonly reads = new Map<string, SharedRead>();
  /** Reads sent to the broker so far: the clock marks are taken on. */
  private sent = 0;
  /** Replays waiting for the broker's link to be back (a read failed while it was down). */
  readonly link: LinkWaiters;

  constructor(
    private readonly broker: Broker,
    maxConcurrent: number,
  ) {
    this.slots = new Slots(Math.max(1, maxConcurrent));
    this.link = new LinkWaiters(broker);
  }

  /** Broker reads under way and waiting (for tests and metrics). */
  get stats(): { reading: number; waiting: number } {
    return { reading: this.slots.inUse, waiting: this.slots.waiting };
  }

  /** Where a reader starts: it may share reads sent after this mark. */
  mark(): number {
    return this.sent;
  }

  /**
   * Read up to `limit` messages of `topic` after `afterSeq`; `done` is called once with the
   * answer or the error. Returns a function that stops waiting (`done` is then never called;
   * a read nobody waits for any more is not sent).
   */
  read(
    topic: string,
    afterSeq: number,
    limit: number,
    mark: number,
    done: (error: unknown, history?: History) => void,
  ): () => void {
    const key = `${afterSeq}:${limit}:${topic}`;
    let read = this.reads.get(key);
    if (!read || (read.sentAt !== undefined && read.sentAt <= mark)) {
      // None, or one sent before this reader started: a read of its own (the older one stays
      // for those already waiting on it, and is no longer found by this key).
      read = this.start(key, topic, afterSeq, limit);
    }
    const shared = read;
    const waiter = (error: unknown, history?: History): void => done(error, history);
    shared.waiters.add(waiter);
    return () => {
      if (!shared.waiters.delete(waiter) || shared.waiters.size > 0) return;
      if (shared.sentAt === undefined) {
        // Nobody waits for it and it was not sent: it never will be.
        shared.cancelTurn?.();
        if (this.reads.get(key) === shared) this.reads.delete(key);
      }
    };
  }

  private start(key: string, topic: string, afterSeq: number, limit: number): SharedRead {
    const read: SharedRead = {
      key,
      waiters: new Set(),
      sentAt: undefined,
      cancelTurn: undefined,
    };
    this.reads.set(key, read);
    read.cancelTurn = this.slots.take((release) => {
      read.cancelTurn = undefined;
      read.sentAt = ++this.sent;
      let answer: Promise<History>;
      try {
        answer = this.broker.history(topic, afterSeq, limit);
      } catch (error) {
        // A broker that throws fails like one that rejects.
        answer = Promise.reject(error instanceof Error ? error : new Error('history read failed'));
      }
      answer
        .then(
          (history) => this.settle(read, undefined, history),
          (error: unknown) => this.settle(read, error ?? new Error('history read failed')),
        )
        .finally(release);
    });
    return read;
  }

  private settle(read: SharedRead, error: unknown, history?: History): void {
    if (this.reads.get(read.key) === read) this.reads.delete(read.key);
    for (const waiter of [...read.waiters]) {
      try {
        waiter(error, history);
      } catch {
        // One waiter's failure is its own; the others still get the answer.
      }
    }
    read.waiters.clear();
  }
}
