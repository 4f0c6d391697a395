import type { Broker } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';

/** Position reads held back by `holdPositionReads`, and the test's handle on them. */
export interface HeldReads {
  /** Whether position reads are held; set false to let the next ones through. */
  hold: boolean;
  readonly held: (() => void)[];
  /** Let every held read through. */
  release(): void;
}

/**
 * Make `broker`'s position reads (a history read from the top, as a subscribe with
 * `position: true` makes) wait until the test releases them; other reads answer at once.
 */
export function holdPositionReads(broker: Pick<Broker, 'history'>): HeldReads {
  const reads: HeldReads = {
    hold: true,
    held: [],
    release() {
      for (const release of reads.held.splice(0)) release();
    },
  };
  const history = broker.history.bind(broker);
  broker.history = (topic, afterSeq, limit) => {
    const read = () => history(topic, afterSeq, limit);
    if (!reads.hold || afterSeq !== Number.MAX_SAFE_INTEGER) return read();
    return new Promise<void>((resolve) => reads.held.push(resolve)).then(read);
  };
  return reads;
}

/** A real MemoryBroker whose position reads wait until the test releases them. */
export class HeldPositionBroker extends MemoryBroker implements HeldReads {
  private readonly reads = holdPositionReads(this);

  get hold(): boolean {
    return this.reads.hold;
  }

  set hold(hold: boolean) {
    this.reads.hold = hold;
  }

  get held(): (() => void)[] {
    return this.reads.held;
  }

  release(): void {
    this.reads.release();
  }
}
