import type { Broker, BrokerMessage } from './broker.js';
import type { Delivery } from './delivery.js';
import { SharedFrame, messageTail } from './frames.js';
import { exceptMatcher } from './except-set.js';
import { deferFanOut, dueCount, flushSince } from '../transport/turn-coalescer.js';

/** One message received this turn, waiting to be fanned out with the turn's others. */
interface Arrived {
  seq: number;
  tail: string;
  shared: SharedFrame;
  except: readonly string[] | undefined;
  /** Set when the message changes the topic's epoch: each subscriber checks its own. */
  epochChange: { epoch: string | undefined; restarted: boolean } | undefined;
}

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
  /** Messages received this turn, not fanned out yet (see fanOut). */
  arrived: Arrived[] | undefined;
}

/**
 * Local subscribers by topic. A topic is subscribed on the broker while at
 * least one local subscription holds it, and dropped from the map (and the
 * broker) when the last one lets go, so the registry returns to empty.
 */
export class TopicRegistry {
  private readonly topics = new Map<string, TopicState>();
  /** Topics with messages received this turn, in the order their first one came. */
  private due: { topic: string; state: TopicState }[] = [];
  private readonly deliverDue = (): void => this.deliverArrived();

  constructor(
    /** Only the subscription half is used: a wrapper need not forward the rest. */
    private readonly broker: Pick<Broker, 'subscribe' | 'unsubscribe'>,
    /** The notification frame's fixed start (notificationHead). */
    private readonly head: string,
    /** Hands out subscription ids; the registry takes one per topic to share. */
    private readonly newId: () => string,
    /** Told what failed without a caller to tell: a broker unsubscribe, or a fan-out. */
    private readonly onError: (
      err: unknown,
      topic: string,
      step: 'broker unsubscribe' | 'fan-out',
    ) => void,
  ) {}

  /** The id shared by the first subscription of each session to `topic`; undefined if not held. */
  sharedId(topic: string): string | undefined {
    return this.topics.get(topic)?.sharedId;
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
        arrived: undefined,
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
    this.broker
      .unsubscribe(topic)
      .catch((err: unknown) => this.onError(err, topic, 'broker unsubscribe'));
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

  /**
   * A message from the broker: numbered and framed now, fanned out once the current task is
   * done (or before any transport writes something else: turn-coalescer's deferFanOut), with
   * the others the topic receives in the same turn. Each subscriber then takes all
   * of them at once and its socket writes them at once (turn-coalescer's flushSince): one write
   * per subscriber and turn, however many messages a burst holds, and the first subscriber's
   * write leaves while the next ones are being served, as a plain loop of sends would.
   */
  private fanOut(message: BrokerMessage): void {
    const state = this.topics.get(message.topic);
    if (!state) return;
    const epoch = message.epoch;
    // Numbering restarted (a broker that lost its data): earlier sequence numbers mean nothing now.
    const restarted =
      message.seq <= state.lastSeq ||
      (epoch !== undefined && state.epoch !== undefined && epoch !== state.epoch);
    // Rare (once per held topic, and on a restart): each subscriber checks its own epoch.
    const epochChange =
      restarted || (epoch !== undefined && state.epoch === undefined)
        ? { epoch, restarted }
        : undefined;
    state.lastSeq = message.seq;
    if (epoch !== undefined) state.epoch = epoch;
    // The payload was serialized once at publish; the tail and the frame are built once per message.
    const tail = messageTail(message.payload, message.seq);
    const shared = new SharedFrame(state.sharedQuotedId, this.head + state.sharedQuotedId + tail);
    const arrived: Arrived = {
      seq: message.seq,
      tail,
      shared,
      except: message.except,
      epochChange,
    };
    if (state.arrived !== undefined) {
      state.arrived.push(arrived);
      return;
    }
    state.arrived = [arrived];
    if (this.due.push({ topic: message.topic, state }) === 1) deferFanOut(this.deliverDue);
  }

  /**
   * Fan out what every topic received this turn. Exposed for tests that drive a broker by hand
   * and check each message's delivery before the next.
   * @internal
   */
  deliverArrived(): void {
    const due = this.due;
    if (due.length === 0) return;
    this.due = [];
    for (const { topic, state } of due) {
      const arrived = state.arrived;
      state.arrived = undefined;
      // A topic let go meanwhile has no subscriber left here to tell.
      if (arrived === undefined || this.topics.get(topic) !== state) continue;
      try {
        this.deliverAll(state.deliveries, arrived);
      } catch (err) {
        this.onError(err, topic, 'fan-out');
      }
    }
  }

  /** Each subscriber gets every message, in order, and its socket writes them before the next's. */
  private deliverAll(deliveries: Set<Delivery>, arrived: Arrived[]): void {
    const only = arrived.length === 1 ? arrived[0]! : undefined;
    if (only !== undefined && only.epochChange === undefined && only.except === undefined) {
      // The common case: one message, nothing to check per subscriber.
      for (const delivery of deliveries) {
        const mark = dueCount();
        delivery.offer(only.tail, only.shared, only.seq);
        flushSince(mark);
      }
      return;
    }
    // Published `except` some sessions: theirs pass it by (one lookup per subscriber).
    const excepted = arrived.map((message) =>
      message.except === undefined ? undefined : exceptMatcher(message.except),
    );
    for (const delivery of deliveries) {
      const mark = dueCount();
      for (let i = 0; i < arrived.length; i++) {
        const message = arrived[i]!;
        const change = message.epochChange;
        if (change !== undefined) delivery.epochSeen(change.epoch, change.restarted);
        const except = excepted[i];
        if (except !== undefined && delivery.ownerId !== undefined && except(delivery.ownerId)) {
          delivery.pass(message.seq);
        } else delivery.offer(message.tail, message.shared, message.seq);
      }
      flushSince(mark);
    }
  }
}
