import { expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import { TopicSubscription } from '../../src/server/topic-subscription.js';
import type { TopicEnds, TopicRoute } from '../../src/server/topic-subscription.js';
import type { SessionTable } from '../../src/server/pubsub-types.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { CompactMap } from '../../src/server/compact-map.js';
import { bytesPerObject } from '../support/heap.js';

/*
 * What one subscription's Delivery holds once it has delivered: a gateway keeps one per
 * subscriber of every topic, so each field is paid for by every subscription. Measured as the
 * heap (but for compiled code) grown by making many deliveries over one sink and one route
 * (what a topic's subscribers share) and handing each a message in order, after full collections.
 *
 * 96 bytes a delivery (a 24-byte header and nine fields; its position a small integer in the
 * object, whether it stopped and whether it tracks positions two bits of one, its owner read from
 * its sink, and what only some have for a while (a held message, seqs passed by, a replay, stop
 * listeners) one field made when needed). A field each for those four makes 120 bytes, and a
 * field each for the two flags and the owner 144; the position kept as NaN while unknown (a
 * 16-byte double box beside each delivery) and the head, flow control and slow-consumer counter
 * one field each would make 16 + 16 more. The bound sits between 96 and 104.
 */
const BOUND_BYTES_PER_DELIVERY = 100;
/*
 * A topic subscription (what a session's table and the topic's registry hold) is its own
 * Delivery: 128 bytes (four fields of its own on top of the delivery's; whether it was announced
 * is a bit of the delivery's flags, what its end tells the node is reached through the route its
 * topic's subscriptions share, and the bytes it counts against its connection are worked out
 * again from its topic and params when it ends). A field of its own for what its end tells makes
 * 136; the delivery's rare four a field each, 152; held beside a Delivery of its own, an object
 * of 64 bytes beside the 96-byte delivery would make 160. The bound sits between 128 and 136.
 */
const BOUND_BYTES_PER_TOPIC_SUBSCRIPTION = 132;
const DELIVERIES = 50_000;
const ROUNDS = 3;
const WARM_UP = 1000;

const sink: Sink = {
  send: () => undefined,
  bufferedAmount: 0,
  close: () => undefined,
  onDrain: () => () => undefined,
};
const tail = messageTail('1', 1);

const owner = 'session-1';
/** The session's sink: its subscriptions' owner is its id. */
const owned: Sink = { ...sink, id: owner };
const table: SessionTable = {
  sink: owned,
  subscriptions: new CompactMap(),
  topicBytes: 0,
  historySlots: undefined,
  drains: undefined,
  newTopics: undefined,
  held: undefined,
};
const ends: TopicEnds<unknown> = {
  registry: { detach: () => undefined, release: () => undefined },
  lifecycle: () => undefined,
};
/** What a topic's subscriptions share (pubsub-service.ts makes one per flow control). */
const route: TopicRoute<unknown> = {
  head: notificationHead('subscription'),
  flow: { slowConsumer: 'drop', highWaterMark: 1 << 20 },
  onSlowConsumer: () => undefined,
  ends,
};

function delivered(): Delivery {
  const delivery = new Delivery(owned, route, '"0x1"');
  delivery.offer(tail, undefined, 1);
  return delivery;
}

/**
 * A socket over the high-water mark until it drains: a keep-latest delivery holds its newest
 * message meanwhile. One for all the deliveries made (each drain sends what each held).
 */
const drains: (() => void)[] = [];
const full = { bufferedAmount: 0 };
const slow: Sink = {
  ...owned,
  get bufferedAmount() {
    return full.bufferedAmount;
  },
  onDrain: (listener) => {
    drains.push(listener);
    return () => undefined;
  },
};
const keepLatest: TopicRoute<unknown> = {
  ...route,
  flow: { slowConsumer: 'keep-latest', highWaterMark: 1 << 20 },
};

/**
 * A delivery that has been through every state it keeps only for a while, each over: a resume
 * (a stop listener, a position read while a live message waited), seqs passed by (`except`)
 * and then accounted for, and a message held until its socket drained.
 */
function pastItsRareStates(): Delivery {
  const delivery = new Delivery(slow, keepLatest, '"0x1"');
  const offStop = delivery.onStop(() => undefined);
  delivery.pauseForReplay();
  delivery.offer(messageTail('2', 2), undefined, 2);
  delivery.sendPosition(1, undefined);
  delivery.replayEnd();
  offStop();
  delivery.pass(4);
  delivery.offer(messageTail('5', 5), undefined, 5);
  full.bufferedAmount = 1 << 21;
  delivery.offer(messageTail('6', 6), undefined, 6);
  full.bufferedAmount = 0;
  drains.splice(0).forEach((drained) => drained());
  return delivery;
}

/** A topic subscription as the pub/sub service makes it, started and having delivered. */
function subscribed(): TopicSubscription<unknown> {
  const subscription = new TopicSubscription<unknown>('prices', undefined, route, '"0x1"', table);
  subscription.started = true;
  subscription.offer(tail, undefined, 1);
  return subscription;
}

/** Heap per object, the objects made kept live (not stopped). */
const leastOf = (make: () => Delivery): number =>
  bytesPerObject(make, { count: DELIVERIES, warmUp: WARM_UP, rounds: ROUNDS }, (d) => !d.isStopped);

it(`a delivery that has delivered holds at most ${BOUND_BYTES_PER_DELIVERY} bytes of its own`, () => {
  expect(leastOf(delivered)).toBeLessThanOrEqual(BOUND_BYTES_PER_DELIVERY);
});

it(`a topic subscription, its delivery included, holds at most ${BOUND_BYTES_PER_TOPIC_SUBSCRIPTION} bytes of its own`, () => {
  // Held as the session's table and the topic's registry hold it: one object.
  expect(leastOf(subscribed)).toBeLessThanOrEqual(BOUND_BYTES_PER_TOPIC_SUBSCRIPTION);
});

it('a delivery past a resume, seqs passed by and a held message holds no more than one that has only delivered', () => {
  expect(leastOf(pastItsRareStates)).toBeLessThanOrEqual(BOUND_BYTES_PER_DELIVERY);
});
