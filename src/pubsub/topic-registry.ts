import type { Broker, BrokerMessage } from './broker.js';
import type { Delivery } from './delivery.js';
import { SharedFrame, messageTail } from './frames.js';

interface TopicState {
  deliveries: Set<Delivery>;
  /** Holders (deliveries plus accepted-but-not-started subscriptions) keeping the broker subscription. */
  holds: number;
  lastSeq: number;
  /** The id every session's first subscription to the topic gets, plain and JSON-quoted. */
  sharedId: string;
  sharedQuotedId: string;
  /** The broker subscription, settled once the broker has the topic. */
  ready: Promise<void> | undefined;
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
    /** The notification frame's fixed start (notificationHead). */
    private readonly head: string,
    /** Hands out subscription ids; the registry takes one per topic to share. */
    private readonly newId: () => string,
    private readonly onBrokerError: (err: unknown, topic: string) => void,
  ) {}

  /** The id shared by the first subscription of each session to `topic`; undefined if not held. */
  sharedId(topic: string): string | undefined {
    return this.topics.get(topic)?.sharedId;
  }

  /**
   * Keep `topic` subscribed on the broker; resolves once the broker has it, for every caller:
   * one that comes while the first is still subscribing waits for the same subscription
   * (accepting its subscriber earlier could let it miss what is published meanwhile).
   */
  async hold(topic: string): Promise<void> {
    let state = this.topics.get(topic);
    if (!state) {
      const sharedId = this.newId();
      state = {
        deliveries: new Set(),
        holds: 0,
        lastSeq: 0,
        sharedId,
        sharedQuotedId: JSON.stringify(sharedId),
        ready: undefined,
      };
      this.topics.set(topic, state);
      // Through a promise, so a broker that throws synchronously fails like one that rejects.
      state.ready = Promise.resolve().then(() =>
        this.broker.subscribe(topic, (message) => this.fanOut(message)),
      );
    }
    state.holds++;
    try {
      await state.ready;
    } catch (err) {
      if (this.topics.get(topic) === state) this.release(topic);
      throw err;
    }
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
    if (message.seq <= state.lastSeq) {
      // Numbering restarted (a broker that lost its data): earlier sequence numbers mean nothing now.
      for (const delivery of state.deliveries) delivery.resetFloor();
    }
    state.lastSeq = message.seq;
    // The payload was serialized once at publish; the tail is built once per message.
    const tail = messageTail(message.payload, message.seq);
    const shared = new SharedFrame(state.sharedQuotedId, this.head + state.sharedQuotedId + tail);
    for (const delivery of state.deliveries) delivery.offer(tail, shared, message.seq);
  }
}
