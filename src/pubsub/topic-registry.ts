import type { Broker, BrokerMessage } from './broker.js';
import type { Delivery } from './delivery.js';
import { messageTail } from './frames.js';

interface TopicState {
  deliveries: Set<Delivery>;
  /** Holders (deliveries plus accepted-but-not-started subscriptions) keeping the broker subscription. */
  holds: number;
  lastSeq: number;
}

/**
 * Local subscribers by topic. A topic is subscribed on the broker while at
 * least one local subscription holds it, and dropped from the map (and the
 * broker) when the last one lets go, so the registry returns to empty.
 */
export class TopicRegistry {
  private readonly topics = new Map<string, TopicState>();

  constructor(
    private readonly broker: Broker,
    private readonly onBrokerError: (err: unknown, topic: string) => void,
  ) {}

  /** Keep `topic` subscribed on the broker; resolves once the broker has it. */
  async hold(topic: string): Promise<void> {
    let state = this.topics.get(topic);
    if (!state) {
      state = { deliveries: new Set(), holds: 0, lastSeq: 0 };
      this.topics.set(topic, state);
      state.holds++;
      try {
        await this.broker.subscribe(topic, (message) => this.fanOut(message));
      } catch (err) {
        this.release(topic);
        throw err;
      }
      return;
    }
    state.holds++;
  }

  /** Undo one `hold`. */
  release(topic: string): void {
    const state = this.topics.get(topic);
    if (!state) return;
    if (--state.holds > 0) return;
    this.topics.delete(topic);
    this.broker.unsubscribe(topic).catch((err: unknown) => this.onBrokerError(err, topic));
  }

  /** Start delivering to a subscription that already holds the topic. */
  attach(topic: string, delivery: Delivery): void {
    this.topics.get(topic)?.deliveries.add(delivery);
  }

  detach(topic: string, delivery: Delivery): void {
    this.topics.get(topic)?.deliveries.delete(delivery);
  }

  /** Topics with at least one local holder. */
  get topicCount(): number {
    return this.topics.size;
  }

  /** Local subscribers of one topic (0 when none). */
  subscriberCount(topic: string): number {
    return this.topics.get(topic)?.deliveries.size ?? 0;
  }

  /** Subscriber counts by topic, for metrics and tests. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [topic, state] of this.topics) out[topic] = state.deliveries.size;
    return out;
  }

  private fanOut(message: BrokerMessage): void {
    const state = this.topics.get(message.topic);
    if (!state) return;
    state.lastSeq = message.seq;
    // The payload was serialized once at publish; the tail is built once per message.
    const tail = messageTail(message.payload, message.seq);
    for (const delivery of state.deliveries) delivery.offer(tail);
  }
}
