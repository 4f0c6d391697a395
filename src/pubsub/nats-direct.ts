/*
 * `$`-topics on NATS: messages addressed to a node or a user (see SessionRouter). They go over
 * core NATS subjects, with no stream and no history: a stream per node or user would pile up,
 * and the router retries what it needs to.
 */
import type { BrokerMessage } from './broker.js';
import { bounded } from './nats-link.js';
import type { Link } from './nats-link.js';
import { natsDirectSubject } from './nats-names.js';

export class NatsDirectSubjects {
  /** Subscribed `$`-topics by topic. */
  private readonly direct = new Map<string, { unsubscribe(): void }>();
  private directSeq = 0;

  constructor(
    private readonly prefix: string,
    private readonly timeoutMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Sent without waiting; resolves to a local count, as addressed messages have no seq. */
  publish(link: Link, topic: string, payload: string): number {
    // Addressed messages need no history: a stream per node or user would pile up.
    link.nc.publish(natsDirectSubject(this.prefix, topic), payload);
    return ++this.directSeq;
  }

  async subscribe(
    link: Link,
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    const what = `subscribe to "${topic}"`;
    this.direct.get(topic)?.unsubscribe();
    let seq = 0;
    // Core subscriptions are re-established by the client after a reconnect.
    const subscription = link.nc.subscribe(natsDirectSubject(this.prefix, topic), {
      callback: (err, msg) => {
        if (err) return this.onError(err);
        try {
          deliver({ topic, seq: ++seq, payload: msg.string() });
        } catch (error) {
          this.onError(error);
        }
      },
    });
    this.direct.set(topic, subscription);
    // Resolve once the server has the interest (a round trip on this connection): a message
    // published by another node after that reaches us.
    try {
      await bounded(what, this.timeoutMs, () => link.nc.flush());
    } catch (err) {
      if (this.direct.get(topic) === subscription) this.direct.delete(topic);
      subscription.unsubscribe();
      throw err;
    }
  }

  /** False when `topic` has no direct subscription here. */
  unsubscribe(topic: string): boolean {
    const direct = this.direct.get(topic);
    if (!direct) return false;
    this.direct.delete(topic);
    direct.unsubscribe();
    return true;
  }
}
