import type { Broker, BrokerMessage } from './broker.js';
import type { Delivery } from './delivery.js';
import { SharedFrame, messageTail } from './frames.js';
import { exceptMatcher } from './except-set.js';

interface TopicState {
  deliveries: Set<Delivery>;
  /** Holders (deliveries plus accepted-but-not-started subscriptions) keeping the broker subscription. */
  holds: number;
  lastSeq: number;
  /** The epoch of the last message, when the broker names its numbering. */
  epoch: string | undefined;
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
    /** Only the subscription half is used: a wrapper need not forward the rest. */
    private readonly broker: Pick<Broker, 'subscribe' | 'unsubscribe'>,
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
   * `id` JSON-quoted: the topic's own string when it is the topic's shared id, so that every
   * subscription sharing it holds one string (not one of its own each) and a shared frame's id
   * is the same string as theirs.
   */
  quotedId(topic: string, id: string): string {
    const state = this.topics.get(topic);
    return state?.sharedId === id ? state.sharedQuotedId : JSON.stringify(id);
  }

  /**
   * Keep `topic` subscribed on the broker; resolves once the broker has it, for every caller:
   * one that comes while the first is still subscribing waits for the same subscription
   * (accepting its subscriber earlier could let it miss what is published meanwhile).
   * When the broker refuses (it is down), every waiting caller rejects and the topic is
   * forgotten at once: nothing stays held, and the next `hold` asks the broker again.
   */
  async hold(topic: string): Promise<void> {
    let state = this.topics.get(topic);
    if (!state) {
      const sharedId = this.newId();
      const created: TopicState = {
        deliveries: new Set(),
        holds: 0,
        lastSeq: 0,
        epoch: undefined,
        sharedId,
        sharedQuotedId: JSON.stringify(sharedId),
        ready: undefined,
      };
      this.topics.set(topic, created);
      // Through a promise, so a broker that throws synchronously fails like one that rejects.
      created.ready = Promise.resolve()
        .then(() => this.broker.subscribe(topic, (message) => this.fanOut(message)))
        .catch((err: unknown) => {
          // The broker never had it: no unsubscribe to send, no holder to keep.
          if (this.topics.get(topic) === created) this.topics.delete(topic);
          throw err;
        });
      state = created;
    }
    state.holds++;
    await state.ready;
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
    const epoch = message.epoch;
    // Numbering restarted (a broker that lost its data): earlier sequence numbers mean nothing now.
    const restarted =
      message.seq <= state.lastSeq ||
      (epoch !== undefined && state.epoch !== undefined && epoch !== state.epoch);
    if (restarted || (epoch !== undefined && state.epoch === undefined)) {
      // Rare (once per held topic, and on a restart): each subscriber checks its own epoch.
      for (const delivery of state.deliveries) delivery.epochSeen(epoch, restarted);
    }
    state.lastSeq = message.seq;
    if (epoch !== undefined) state.epoch = epoch;
    // The payload was serialized once at publish; the tail is built once per message.
    const tail = messageTail(message.payload, message.seq);
    const shared = new SharedFrame(state.sharedQuotedId, this.head + state.sharedQuotedId + tail);
    const except = message.except;
    if (except === undefined) {
      for (const delivery of state.deliveries) delivery.offer(tail, shared, message.seq);
      return;
    }
    // Published `except` some sessions: theirs pass it by (one lookup per subscriber).
    const excepted = exceptMatcher(except);
    for (const delivery of state.deliveries) {
      if (delivery.ownerId !== undefined && excepted(delivery.ownerId)) {
        delivery.pass(message.seq);
      } else delivery.offer(tail, shared, message.seq);
    }
  }
}
