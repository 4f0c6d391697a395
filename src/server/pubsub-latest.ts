// A latest-value topic's first message: a new subscriber (no `since`) gets the topic's last
// message before the live ones, told its position first when it asked for it. Apart from the service, beside the resume, because
// it reasons the same way about what the subscriber holds back while history is read.
import type { Broker } from '../pubsub/broker.js';
import type { Delivery } from '../pubsub/delivery.js';
import { messageTail } from '../pubsub/frames.js';
import { isSendableFrom } from '../pubsub/sendable-payload.js';
import { subscriberReads } from './subscriber-reads.js';
import type { SubscriberRead, SubscriberReadLimits } from './subscriber-reads.js';

/**
 * What the read found: the topic's last message (its payload while history still holds it),
 * undefined when nothing was ever published, 'stopped' when the subscription ended first.
 */
export type LatestValue =
  | {
      seq: number;
      payload: string | undefined;
      epoch: string | undefined;
      /** The sessions it was published except: one of them passes it by, as its live copy. */
      except?: readonly string[] | undefined;
    }
  | undefined
  | 'stopped';

/**
 * Hold the subscriber's live messages and read the topic's last seq, then its last message.
 * Rejects when the broker cannot be read: the subscribe is then refused (-32009), so that no
 * subscriber takes "nothing first" for "the topic has no message".
 *
 * Each read holds one of the connection's slots and goes through the node's reads (`limits`),
 * as a resume's pages do: a subscriber waiting its turn keeps its live messages held and still
 * gets the latest value first. Subscribers of a topic waiting together share the node's reads,
 * and one that unsubscribes gives up its turn and its reads (one nobody else waits for is not
 * sent), so subscribing and unsubscribing in a loop cannot pile reads up at the broker.
 */
export function readLatestValue(
  broker: Broker,
  topic: string,
  delivery: Delivery,
  limits: SubscriberReadLimits = {},
): Promise<LatestValue> {
  delivery.pauseForReplay();
  return readLatest(subscriberReads(broker, topic, delivery, limits));
}

/**
 * Send what `readLatestValue` found, then release the live messages held since. Each seq once:
 * a live message the read already had is dropped, and one that came after it is sent after it,
 * so a publish racing the read is neither doubled nor lost. A subscriber that asked for its
 * position (`withPosition`) is told it first: the seq before the latest value, which is then its
 * first message (0, and no epoch, when the topic has none).
 */
export function sendLatestValue(
  broker: Broker,
  delivery: Delivery,
  latest: LatestValue,
  withPosition = false,
): void {
  // The subscription ended while it waited: nothing to send.
  if (latest === 'stopped') return;
  if (latest === undefined) {
    if (withPosition) delivery.sendPosition(0, undefined);
    delivery.resume(0, [], 0);
    return;
  }
  const { seq, payload, epoch, except } = latest;
  if (payload === undefined) {
    // Gone from history (its retention dropped it): nothing is owed before the live messages,
    // which start after it.
    if (withPosition) delivery.sendPosition(seq, epoch);
    delivery.resume(0, [], seq, epoch);
    return;
  }
  if (withPosition) delivery.sendPosition(seq - 1, epoch);
  // One that cannot go into a frame is not sent: the next message tells of it as missed.
  const sendable = isSendableFrom(broker, payload);
  if (!sendable) delivery.countFrom(seq - 1);
  const entries = sendable ? [{ tail: messageTail(payload, seq), seq, except }] : [];
  delivery.resume(0, entries, seq - 1, epoch);
}

async function readLatest(read: SubscriberRead): Promise<LatestValue> {
  // After the last possible seq: no messages, only the topic's latest seq (the same read for
  // every subscriber of the topic, so those waiting together share one).
  const head = await read(Number.MAX_SAFE_INTEGER, 1);
  if (head === undefined) return 'stopped';
  const { lastSeq } = head;
  if (lastSeq < 1) return undefined;
  const page = await read(lastSeq - 1, 1);
  if (page === undefined) return 'stopped';
  const message = page.messages[0];
  // Published to again between the two reads: the one read is still the last this subscriber
  // is owed before the live ones, which the delivery holds back from the first read on.
  if (message === undefined) return { seq: lastSeq, payload: undefined, epoch: page.epoch };
  return { seq: message.seq, payload: message.payload, epoch: page.epoch, except: message.except };
}
