import { MemoryBroker } from '../../src/pubsub/memory-broker.js';

/**
 * A real MemoryBroker whose position reads (a history read from the top, as a subscribe with
 * `position: true` makes) wait until the test releases them; other reads answer at once.
 */
export class HeldPositionBroker extends MemoryBroker {
  /** Whether position reads are held; set false to let the next ones through. */
  hold = true;
  readonly held: (() => void)[] = [];

  override history(topic: string, afterSeq: number, limit?: number) {
    const read = () => super.history(topic, afterSeq, limit);
    if (!this.hold || afterSeq !== Number.MAX_SAFE_INTEGER) return read();
    return new Promise<void>((resolve) => this.held.push(resolve)).then(read);
  }

  /** Let every held read through. */
  release(): void {
    for (const release of this.held.splice(0)) release();
  }
}
