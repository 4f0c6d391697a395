import { expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
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

function delivered(ownerId: string): Delivery {
  const delivery = new Delivery(sink, route, '"0x1"', ownerId);
  delivery.offer(tail, undefined, 1);
  return delivery;
}

/** Heap grown per delivery by making DELIVERIES of them (after a warm-up, so shapes settle). */
function perDeliveryBytes(): number {
  const owner = 'session-1';
  const deliveries = new Array<Delivery | undefined>(DELIVERIES + WARM_UP).fill(undefined);
  for (let i = 0; i < WARM_UP; i++) deliveries[i] = delivered(owner);
  fullGc();
  const before = heapUsedButCode();
  for (let i = WARM_UP; i < DELIVERIES + WARM_UP; i++) deliveries[i] = delivered(owner);
  fullGc();
  const grown = heapUsedButCode() - before;
  expect(deliveries.every((d) => d !== undefined && !d.isStopped)).toBe(true);
  return grown / DELIVERIES;
}

it('a delivery that has delivered holds at most 160 bytes of its own', () => {
  // The least of a few rounds: what else the test process allocates meanwhile only adds.
  const perDelivery = Math.min(...Array.from({ length: ROUNDS }, perDeliveryBytes));
  expect(perDelivery).toBeLessThanOrEqual(BOUND_BYTES_PER_DELIVERY);
});
