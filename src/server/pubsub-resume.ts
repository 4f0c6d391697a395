// Where a topic subscriber starts: its position (`position: true`) or a resume from `since`,
// with the gap and epoch decisions that go with it. Apart from the service because it is the
// one part that reasons about the broker's numbering; the service only picks which to run.
import type { Logger } from '../peer/logger.js';
import type { Broker, BrokerMessage } from '../pubsub/broker.js';
import type { Delivery } from '../pubsub/delivery.js';
import { messageTail } from '../pubsub/frames.js';

/**
 * Tell the subscriber where it starts: `{"subscription": id, "seq": N, "epoch": E}`, N being
 * the last message it will not get and E the broker's name for the topic's numbering (when
 * it has one). Live messages wait meanwhile, so N is exact.
 */
export function sendPosition(
  broker: Broker,
  logger: Logger,
  topic: string,
  delivery: Delivery,
): void {
  delivery.pauseForReplay();
  broker.history(topic, Number.MAX_SAFE_INTEGER).then(
    ({ lastSeq, epoch }) => {
      // Messages that arrived while asking are delivered: the position is just before them.
      const position = Math.min(lastSeq, (delivery.firstWaitingSeq ?? lastSeq + 1) - 1);
      delivery.sendPosition(position, epoch);
      delivery.resume(0, [], position);
    },
    (err: unknown) => {
      logger.warn({ err, topic }, 'could not read the topic position');
      // Told no position, the subscriber starts from its first message (nothing is checked before).
      delivery.resume(0, [], 0);
    },
  );
}

/**
 * Resume: live messages wait while history after `since` is fetched; then the
 * subscriber gets a gap signal if history no longer reaches back that far, the
 * retained messages, and the live ones, each sequence number once.
 *
 * When `since` cannot belong to the broker's numbering (it is past the topic's last
 * sequence number, or the client's epoch is not the topic's), the broker lost the topic and
 * numbers it anew: the subscriber gets a gap signal of unknown size (`null`) with the new
 * epoch, then everything history holds, then the live messages.
 */
export function replay(
  broker: Broker,
  logger: Logger,
  topic: string,
  since: number,
  clientEpoch: string | undefined,
  delivery: Delivery,
): void {
  delivery.pauseForReplay(since);
  void readReplay(broker, topic, since, clientEpoch, delivery).then(
    ({ gap, messages, floorSeq, epoch }) => {
      const history = messages.map((m) => ({ tail: messageTail(m.payload, m.seq), seq: m.seq }));
      delivery.resume(gap, history, floorSeq, epoch);
    },
    (err: unknown) => {
      logger.warn({ err, topic }, 'history unavailable: resuming live only');
      // How much was lost is unknown: say so rather than pretend nothing was.
      delivery.resume(null, []);
    },
  );
}

async function readReplay(
  broker: Broker,
  topic: string,
  since: number,
  clientEpoch: string | undefined,
  delivery: Delivery,
): Promise<{
  gap: number | null;
  messages: BrokerMessage[];
  floorSeq: number | undefined;
  epoch: string | undefined;
}> {
  const { messages, lastSeq, epoch } = await broker.history(topic, since);
  const otherEpoch = clientEpoch !== undefined && epoch !== undefined && clientEpoch !== epoch;
  if (since <= lastSeq && !otherEpoch) {
    const firstAvailable = messages[0]?.seq ?? lastSeq + 1;
    return {
      gap: Math.max(0, firstAvailable - (since + 1)),
      messages,
      floorSeq: undefined,
      epoch,
    };
  }
  // Another numbering: the client's position (and epoch) mean nothing here. Keep every live
  // message from now on, and read history from its start.
  delivery.resetFloor();
  delivery.clientEpoch = undefined;
  const all = await broker.history(topic, 0);
  return { gap: null, messages: all.messages, floorSeq: 0, epoch: all.epoch };
}
