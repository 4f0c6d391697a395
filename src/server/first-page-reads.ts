// The first page of a `$presence` subscription (the topic's count and first members), read from
// the presence store. Each subscribe asked for one, so a client subscribing and unsubscribing in
// a loop could keep the broker as busy as it liked (reads are not cancelled, and the subscribe is
// answered before its read ends). Here the reads of one topic are shared, and bounded on the node.

/** Whoever waits for a topic's first page. */
export interface FirstPageWaiter<P> {
  done(page: P): void;
  fail(err: unknown): void;
}

interface TopicReads<P> {
  /** Waiting for the next read: one that starts after they came (see `want`). */
  waiting: Set<FirstPageWaiter<P>>;
  /** A read of the topic is under way. */
  reading: boolean;
  /** The topic is in the queue for a node slot. */
  queued: boolean;
}

/**
 * At most one read per topic at a time, and at most `maxReads` on the node: a waiter joins the
 * next read of its topic, never one already under way (what changed between that read and the
 * waiter's watch of events would be missed), so a topic costs at most one read in flight and
 * one waiting, however many subscribe. A waiter that leaves before its read starts costs none.
 */
export class FirstPageReads<P> {
  private readonly topics = new Map<string, TopicReads<P>>();
  /** Topics waiting for a node slot, in order. */
  private readonly queue: string[] = [];
  private running = 0;

  constructor(
    private readonly maxReads: number,
    private readonly read: (topic: string) => Promise<P>,
  ) {}

  /** Reads under way on the node. */
  get inFlight(): number {
    return this.running;
  }

  /**
   * Wait for a read of `topic` that starts from now on; the function returned leaves (nothing
   * more is told to the waiter, even of a read it is in).
   */
  want(topic: string, waiter: FirstPageWaiter<P>): () => void {
    let reads = this.topics.get(topic);
    if (!reads) {
      reads = { waiting: new Set(), reading: false, queued: false };
      this.topics.set(topic, reads);
    }
    // The set it joins goes with the read when it starts: leaving takes it out of that read too.
    const joined = reads.waiting;
    joined.add(waiter);
    if (!reads.reading && !reads.queued) this.enqueue(topic, reads);
    return () => {
      joined.delete(waiter);
    };
  }

  private enqueue(topic: string, reads: TopicReads<P>): void {
    reads.queued = true;
    this.queue.push(topic);
    this.pump();
  }

  private pump(): void {
    while (this.running < this.maxReads && this.queue.length > 0) {
      const topic = this.queue.shift()!;
      const reads = this.topics.get(topic)!;
      reads.queued = false;
      if (reads.waiting.size === 0) {
        // Everyone left before it started: no read.
        if (!reads.reading) this.topics.delete(topic);
        continue;
      }
      this.start(topic, reads);
    }
  }

  private start(topic: string, reads: TopicReads<P>): void {
    const waiters = reads.waiting;
    reads.waiting = new Set();
    reads.reading = true;
    this.running++;
    let read: Promise<P>;
    try {
      read = this.read(topic);
    } catch (err) {
      read = Promise.reject(err as Error);
    }
    read
      .then(
        (page) => {
          for (const waiter of waiters) waiter.done(page);
        },
        (err: unknown) => {
          for (const waiter of waiters) waiter.fail(err);
        },
      )
      .finally(() => {
        this.running--;
        reads.reading = false;
        if (reads.waiting.size > 0) this.enqueue(topic, reads);
        else {
          this.topics.delete(topic);
          this.pump();
        }
      });
  }
}
