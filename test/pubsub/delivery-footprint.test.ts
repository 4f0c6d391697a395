import { expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import { TopicSubscription } from '../../src/server/topic-subscription.js';
import type { TopicEnds } from '../../src/server/topic-subscription.js';
import type { SessionTable } from '../../src/server/pubsub-types.js';
import type { DeliveryRoute } from '../../src/pubsub/delivery.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';

/*
 * What one subscription's Delivery holds once it has delivered: a gateway keeps one per
 * subscriber of every topic, so each field is paid for by every subscription. Measured as the
 * heap (but for compiled code) grown by making many deliveries over one sink and one route
 * (what a topic's subscribers share) and handing each a message in order, after full collections.
 *
 * Heap snapshots give 144 bytes a delivery (a 24-byte header and fifteen fields; its position a
 * small integer in the object). Kept as NaN while unknown, the position was a double: a 16-byte
 * box of its own beside each delivery, and the head, flow control and slow-consumer counter, one
 * field each, made 176 + 16 bytes. The bound sits between.
 */
const BOUND_BYTES_PER_DELIVERY = 160;
/*
 * A topic subscription (what a session's table and the topic's registry hold) is its own
 * Delivery: 200 bytes (seven fields of its own on top of the delivery's). Held beside a Delivery
 * of its own, it was an 88-byte object and the 144-byte delivery: 232 bytes. The bound sits
 * between.
 */
const BOUND_BYTES_PER_TOPIC_SUBSCRIPTION = 216;
const DELIVERIES = 50_000;
const ROUNDS = 3;
const WARM_UP = 1000;

const sink: Sink = {
  send: () => undefined,
  bufferedAmount: 0,
  close: () => undefined,
  onDrain: () => () => undefined,
};
const route: DeliveryRoute = {
  head: notificationHead('subscription'),
  flow: { slowConsumer: 'drop', highWaterMark: 1 << 20 },
  onSlowConsumer: () => undefined,
};
const tail = messageTail('1', 1);

const owner = 'session-1';
const table: SessionTable = {
  // The session, as a topic subscription reads its owner's id from it.
  sink: Object.assign({ id: owner }, sink),
  subscriptions: new Map(),
  topicBytes: 0,
  historySlots: undefined,
  drains: undefined,
  newTopics: undefined,
};
const ends: TopicEnds<unknown> = {
  registry: { detach: () => undefined, release: () => undefined },
  lifecycle: () => undefined,
};

function delivered(): Delivery {
  const delivery = new Delivery(sink, route, '"0x1"', owner);
  delivery.offer(tail, undefined, 1);
  return delivery;
}

/** A topic subscription as the pub/sub service makes it, started and having delivered. */
function subscribed(): TopicSubscription<unknown> {
  const subscription = new TopicSubscription<unknown>(
    'prices',
    undefined,
    route,
    '"0x1"',
    6,
    table,
    ends,
  );
  subscription.started = true;
  subscription.offer(tail, undefined, 1);
  return subscription;
}

/** Heap grown per object by making DELIVERIES of them (after a warm-up, so shapes settle). */
function perObjectBytes(make: () => Delivery): number {
  const made = new Array<Delivery | undefined>(DELIVERIES + WARM_UP).fill(undefined);
  for (let i = 0; i < WARM_UP; i++) made[i] = make();
  fullGc();
  const before = heapUsedButCode();
  for (let i = WARM_UP; i < DELIVERIES + WARM_UP; i++) made[i] = make();
  fullGc();
  const grown = heapUsedButCode() - before;
  expect(made.every((d) => d !== undefined && !d.isStopped)).toBe(true);
  return grown / DELIVERIES;
}

/** The least of a few rounds: what else the test process allocates meanwhile only adds. */
const leastOf = (make: () => Delivery): number =>
  Math.min(...Array.from({ length: ROUNDS }, () => perObjectBytes(make)));

it('a delivery that has delivered holds at most 160 bytes of its own', () => {
  expect(leastOf(delivered)).toBeLessThanOrEqual(BOUND_BYTES_PER_DELIVERY);
});

it('a topic subscription, its delivery included, holds at most 216 bytes of its own', () => {
  // Held as the session's table and the topic's registry hold it: one object.
  expect(leastOf(subscribed)).toBeLessThanOrEqual(BOUND_BYTES_PER_TOPIC_SUBSCRIPTION);
});
