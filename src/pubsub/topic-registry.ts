import type { Broker, BrokerMessage } from './broker.js';
import type { Delivery } from './delivery.js';
import { SharedFrame, messageTail } from './frames.js';
import { exceptMatcher } from './except-set.js';
import { isSendableFrom } from './sendable-payload.js';

/**
 * A topic with more local subscribers than this is fanned out this many subscribers per
 * event-loop turn, the sockets' I/O served in between: a socket write costs 15 to 30 µs here, so
 * a turn holds the loop a few ms, where writing to 10,000 subscribers in one held it 200 to 300
 * ms (bench/scale/loop-delay.mjs).
 */
export const FAN_OUT_PER_TURN = 250;

/**
 * The most messages of one topic that wait for a fan-out under way over several turns: past it,
 * the fan-out is finished at once, in the turn, as a small topic's is. So what waits is bounded,
 * and a node that cannot keep up is held back by its broker link as it would be without turns.
 */
export const MAX_FAN_OUT_BACKLOG = 1_000;

/** A message ready to offer to each subscriber: its frame built once. */
interface Prepared {
  readonly tail: string;
  readonly shared: SharedFrame;
  readonly seq: number;
  /** Published `except` some sessions: whether a session is one of them. */
  readonly excepted: ((sessionId: string) => boolean) | undefined;
  /**
   * The numbering restarted, or named its epoch for the first time: told before the message.
   * `rewound`: restarted in the same epoch (its seq went back).
   */
  readonly notice: { epoch: string | undefined; restarted: boolean; rewound: boolean } | undefined;
  /**
   * Its payload cannot go into a frame (isSendablePayload): offered to nobody. Each subscriber's
   * next message then tells of it (a gap signal, or `missed`), as of any message not received.
   */
  readonly unsendable: boolean;
}

/** A big topic's fan-out under way: `batch` to every subscriber, `iterator` the next ones. */
interface FanOutInTurns {
  batch: Prepared[];
  iterator: Iterator<Delivery> | undefined;
  /** Arrived since the batch started: the next batch. */
  pending: Prepared[];
}

interface TopicState {
  deliveries: Set<Delivery>;
  /** Set while a fan-out goes on over several turns: later messages wait behind it. */
  fanning: FanOutInTurns | undefined;
  /** True while subscribers are being offered a message (see `fanOut`). */
  offering: boolean;
  /** Messages the broker handed over while `offering`, in order: they go once it is done. */
  reentered: BrokerMessage[] | undefined;
  /** Holders (deliveries plus accepted-but-not-started subscriptions) keeping the broker subscription. */
  holds: number;
  lastSeq: number;
  /** The epoch of the last message, when the broker names its numbering. */
  epoch: string | undefined;
  /** The id every session's first subscription to the topic gets, plain and JSON-quoted. */
  sharedId: string;
  sharedQuotedId: string;
  /**
   * The broker subscription while it is being made (its holders wait for it); undefined once the
   * broker has the topic, so that a topic held for long keeps no settled promise.
   */
  ready: Promise<void> | undefined;
}

/**
 * Local subscribers by topic. A topic is subscribed on the broker while at
 * least one local subscription holds it, and dropped from the map (and the
 * broker) when the last one lets go, so the registry returns to empty.
 */
export class TopicRegistry {
  private readonly topics = new Map<string, TopicState>();
  /**
   * What the broker calls with each message of every topic held: one function for them all
   * (the message names its topic), where one per topic would keep a closure and its scope for
   * as long as the topic is held.
   */
  private readonly deliver = (message: BrokerMessage): void => this.fanOut(message);

  constructor(
    /** Only the subscription half is used: a wrapper need not forward the rest. */
    private readonly broker: Pick<Broker, 'subscribe' | 'unsubscribe' | 'trustedPayloads'>,
    /** The notification frame's fixed start (notificationHead). */
    private readonly head: string,
    /** Hands out subscription ids; the registry takes one per topic to share. */
    private readonly newId: () => string,
    private readonly onBrokerError: (err: unknown, topic: string) => void,
    /** Subscribers written to per turn on a big topic (FAN_OUT_PER_TURN; tests use fewer). */
    private readonly perTurn = FAN_OUT_PER_TURN,
    /** Messages that may wait behind a fan-out in turns (MAX_FAN_OUT_BACKLOG). */
    private readonly maxBacklog = MAX_FAN_OUT_BACKLOG,
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
        fanning: undefined,
        offering: false,
        reentered: undefined,
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
        .then(() => this.broker.subscribe(topic, this.deliver))
        .then(
          () => {
            created.ready = undefined;
          },
          (err: unknown) => {
            // The broker never had it: no unsubscribe to send, no holder to keep.
            if (this.topics.get(topic) === created) this.topics.delete(topic);
            throw err;
          },
        );
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

  /**
   * A message from the broker, to every local subscriber of its topic, in the order the broker
   * sent them. A topic of at most `perTurn` subscribers is written to at once. A bigger one is
   * written to `perTurn` subscribers per turn: the messages that arrive in the task gather into
   * one batch (each subscriber gets them in one write), and those that arrive while it goes on
   * wait for the next, so every subscriber gets every message in order.
   */
  private fanOut(message: BrokerMessage): void {
    const state = this.topics.get(message.topic);
    if (!state) return;
    // Offering a message can publish to the same topic before it returns (a slow consumer closed
    // mid-loop tells `events$` its unsubscribe, whose observer announces the leave), and a broker
    // that fans out at once (the memory broker) hands that message over here: it waits for the
    // loop, or the subscribers after the closed one would get it before the message they are
    // still owed (which they then drop as already seen).
    if (state.offering) {
      (state.reentered ??= []).push(message);
      return;
    }
    state.offering = true;
    try {
      this.route(state, message);
    } finally {
      this.endOffering(state);
    }
  }

  /**
   * Route what was handed over while offering, then take the flag down: in a `finally`, so that
   * an offer that threw leaves no message behind to go after later ones (or never).
   */
  private endOffering(state: TopicState): void {
    try {
      this.routeReentered(state);
    } finally {
      state.offering = false;
    }
  }

  /** What was handed over while offering, in order (and what that hands over in turn). */
  private routeReentered(state: TopicState): void {
    for (let waiting = state.reentered; waiting; waiting = state.reentered) {
      state.reentered = undefined;
      for (const message of waiting) this.route(state, message);
    }
  }

  /** A message to the topic's subscribers: at once, or behind (or as) a fan-out in turns. */
  private route(state: TopicState, message: BrokerMessage): void {
    const prepared = this.prepare(state, message);
    const fanning = state.fanning;
    if (fanning) {
      fanning.pending.push(prepared);
      if (fanning.pending.length >= this.maxBacklog) this.fanOutInTurns(state, fanning, Infinity);
      return;
    }
    if (state.deliveries.size > this.perTurn) {
      const started: FanOutInTurns = { batch: [], iterator: undefined, pending: [prepared] };
      state.fanning = started;
      queueMicrotask(() => this.fanOutInTurns(state, started, this.perTurn));
      return;
    }
    const { tail, shared, seq, excepted, notice, unsendable } = prepared;
    if (excepted === undefined && notice === undefined && !unsendable) {
      for (const delivery of state.deliveries) delivery.offer(tail, shared, seq);
      return;
    }
    // Rare: published `except` some sessions, or a notice each subscriber checks its epoch by
    // (once per held topic, and on a restart).
    for (const delivery of state.deliveries) offerTo(delivery, prepared);
  }

  /** The message's frame and what each subscriber is to check first; the topic's numbering moves on. */
  private prepare(state: TopicState, message: BrokerMessage): Prepared {
    const epoch = message.epoch;
    // Numbering restarted (a broker that lost its data): earlier sequence numbers mean nothing now.
    const renamed = epoch !== undefined && state.epoch !== undefined && epoch !== state.epoch;
    const rewound = !renamed && message.seq <= state.lastSeq;
    const restarted = renamed || rewound;
    const notice =
      restarted || (epoch !== undefined && state.epoch === undefined)
        ? { epoch, restarted, rewound }
        : undefined;
    state.lastSeq = message.seq;
    if (epoch !== undefined) state.epoch = epoch;
    const unsendable = !isSendableFrom(this.broker, message.payload);
    if (unsendable) {
      this.onBrokerError(
        new Error(
          `message ${message.seq} of the broker cannot be sent (see isSendablePayload): not one JSON value on one line, nested too deep, or holding a lone surrogate or a number beyond a double's range`,
        ),
        message.topic,
      );
    }
    // The payload was serialized once at publish; the tail is built once per message.
    const tail = messageTail(message.payload, message.seq);
    const shared = new SharedFrame(state.sharedQuotedId, this.head + state.sharedQuotedId + tail);
    // Published `except` some sessions: theirs pass it by (one lookup per subscriber).
    const excepted = message.except === undefined ? undefined : exceptMatcher(message.except);
    return { tail, shared, seq: message.seq, excepted, notice, unsendable };
  }

  /**
   * Go on with a fan-out in turns: up to `limit` subscribers now, the rest in the next turn; a
   * finished batch makes way for the messages that waited. `limit` Infinity finishes it all now.
   */
  private fanOutInTurns(state: TopicState, fanning: FanOutInTurns, limit: number): void {
    // Finished (at once, past the backlog bound) since this turn was planned.
    if (state.fanning !== fanning) return;
    // Past the backlog bound, from `route`: already offering, and what it hands over waits.
    if (state.offering) return this.continueFanning(state, fanning, limit);
    state.offering = true;
    try {
      this.continueFanning(state, fanning, limit);
    } finally {
      this.endOffering(state);
    }
  }

  private continueFanning(state: TopicState, fanning: FanOutInTurns, limit: number): void {
    for (let written = 0; ;) {
      if (fanning.iterator === undefined) {
        if (fanning.pending.length === 0) {
          state.fanning = undefined;
          return;
        }
        fanning.batch = fanning.pending;
        fanning.pending = [];
        // A subscriber that joins meanwhile is visited too (a Set's iterator reaches what is
        // added after it): a message it is given from before it joined is accounted for by its
        // position, as one the broker sends it late is.
        fanning.iterator = state.deliveries.values();
      }
      for (;;) {
        if (written >= limit) {
          setImmediate(() => this.fanOutInTurns(state, fanning, this.perTurn));
          return;
        }
        const next = fanning.iterator.next();
        if (next.done === true) break;
        for (const prepared of fanning.batch) offerTo(next.value, prepared);
        written++;
      }
      fanning.iterator = undefined;
    }
  }
}

/** One prepared message to one subscriber: its epoch notice first, then the message or its pass. */
function offerTo(delivery: Delivery, prepared: Prepared): void {
  const { notice, excepted } = prepared;
  if (notice) delivery.epochSeen(notice.epoch, notice.restarted, notice.rewound);
  if (prepared.unsendable) return;
  if (excepted !== undefined && delivery.ownerId !== undefined && excepted(delivery.ownerId)) {
    delivery.pass(prepared.seq);
  } else delivery.offer(prepared.tail, prepared.shared, prepared.seq);
}
