// A subscriber's history reads, as every way a subscription starts makes them (a resume's pages,
// a position, a latest value): each holds one of the connection's slots and goes through the
// node's shared, bounded reads, and ends with the subscription. Apart from those, so that none
// of them can reach the broker another way.
import type { Broker, History } from '../pubsub/broker.js';
import type { Delivery } from '../pubsub/delivery.js';
import type { HistoryReads } from '../pubsub/history-reads.js';
import type { Slots } from '../pubsub/slots.js';

/** Where a subscriber's reads go: the node's shared, bounded reads and the connection's slots. */
export interface SubscriberReadLimits {
  /** The node's history reads (shared, at most so many at once). Default: the broker, directly. */
  reads?: HistoryReads;
  /** The connection's slots: a read is made while holding one. Default: no bound. */
  slots?: Slots;
}

/** One read of the subscriber's topic; undefined when the subscription stopped first. */
export type SubscriberRead = (afterSeq: number, limit: number) => Promise<History | undefined>;

/**
 * Reads of `topic` for `delivery`. The node's reads are shared only with reads sent from now
 * on (HistoryReads.mark): call this once the subscriber holds back its live messages, so that
 * no answer is older than what it holds.
 */
export function subscriberReads(
  broker: Broker,
  topic: string,
  delivery: Delivery,
  { reads, slots }: SubscriberReadLimits,
): SubscriberRead {
  const mark = reads?.mark() ?? 0;
  return (afterSeq, limit) =>
    readHoldingSlot(delivery, slots, (done) => {
      if (reads) return reads.read(topic, afterSeq, limit, mark, done);
      broker.history(topic, afterSeq, limit).then(
        (history) => done(undefined, history),
        (error: unknown) => done(error ?? new Error('history read failed')),
      );
      return () => undefined;
    });
}

/**
 * One read, holding one of `slots` while it is made. Undefined when the subscription stopped
 * meanwhile; then nothing is left waiting (no turn for a slot, no slot held, no read waited
 * for: a node read nobody else waits for is not sent).
 */
function readHoldingSlot(
  delivery: Delivery,
  slots: Slots | undefined,
  start: (done: (error: unknown, history?: History) => void) => () => void,
): Promise<History | undefined> {
  return new Promise((resolve, reject) => {
    if (delivery.isStopped) {
      resolve(undefined);
      return;
    }
    let settled = false;
    /** Gives up what is waited for now: the turn for a slot, or the read. */
    let cancelWait: (() => void) | undefined;
    /** The connection slot held while reading. */
    let release: (() => void) | undefined;
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      offStop();
      const cancel = cancelWait;
      cancelWait = undefined;
      cancel?.();
      const held = release;
      release = undefined;
      held?.();
      outcome();
    };
    const offStop = delivery.onStop(() => finish(() => resolve(undefined)));
    const reading = (held: () => void): void => {
      release = held;
      if (settled) {
        release = undefined;
        held();
        return;
      }
      cancelWait = start((error, history) => {
        cancelWait = undefined;
        if (error === undefined) finish(() => resolve(history));
        else finish(() => reject(toError(error)));
      });
    };
    if (!slots) {
      reading(() => undefined);
      return;
    }
    const giveUpTurn = slots.take(reading);
    if (release === undefined && !settled) cancelWait = giveUpTurn;
  });
}

function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : 'history read failed');
}
