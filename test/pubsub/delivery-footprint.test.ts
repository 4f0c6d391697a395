import { expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import { TopicSubscription } from '../../src/server/topic-subscription.js';
import type { TopicEnds } from '../../src/server/topic-subscription.js';
import type { SessionTable } from '../../src/server/pubsub-types.js';
import type { DeliveryRoute } from '../../src/pubsub/delivery.js';
import { messageTail, notificationHead } from '../../src/pubsub/frames.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { CompactMap } from '../../src/server/compact-map.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';

/*
 * What one subscription's Delivery holds once it has delivered: a gateway keeps one per
 * subscriber of every topic, so each field is paid for by every subscription. Measured as the
 * heap (but for compiled code) grown by making many deliveries over one sink and one route
 * (what a topic's subscribers share) and handing each a message in order, after full collections.
 *
 * 128 bytes a delivery (a 24-byte header and thirteen fields; its position a small integer in
 * the object, whether it stopped and whether it tracks positions two bits of one, its owner read
 * from its sink). A field each for those three makes 144 bytes; the position kept as NaN while
 * unknown (a 16-byte double box beside each delivery) and the head, flow control and
 * slow-consumer counter one field each would make 176 + 16. The bound sits between 128 and 144.
 */
const BOUND_BYTES_PER_DELIVERY = 136;
/*
 * A topic subscription (what a session's table and the topic's registry hold) is its own
 * Delivery: 168 bytes (five fields of its own on top of the delivery's; whether it was announced
 * is a bit of the delivery's flags, and the bytes it counts against its connection are worked out
 * again from its topic and params when it ends). A field each for those, and for the delivery's
 * own, makes 200 bytes; held beside a Delivery of its own, an 88-byte object and the 144-byte
 * delivery would make 232 bytes. The bound sits between 168 and 200.
 */
const BOUND_BYTES_PER_TOPIC_SUBSCRIPTION = 184;
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
/** The session's sink: its subscriptions' owner is its id. */
const owned: Sink = { ...sink, id: owner };
const table: SessionTable = {
  sink: owned,
  subscriptions: new CompactMap(),
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
  const delivery = new Delivery(owned, route, '"0x1"');
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

it(`a delivery that has delivered holds at most ${BOUND_BYTES_PER_DELIVERY} bytes of its own`, () => {
  expect(leastOf(delivered)).toBeLessThanOrEqual(BOUND_BYTES_PER_DELIVERY);
});

it(`a topic subscription, its delivery included, holds at most ${BOUND_BYTES_PER_TOPIC_SUBSCRIPTION} bytes of its own`, () => {
  // Held as the session's table and the topic's registry hold it: one object.
  expect(leastOf(subscribed)).toBeLessThanOrEqual(BOUND_BYTES_PER_TOPIC_SUBSCRIPTION);
});
