// A latest-value topic's first message: a new subscriber (no `since`, no `position`) gets the
// topic's last message before the live ones. Apart from the service, beside the resume, because
// it reasons the same way about what the subscriber holds back while history is read.
import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import type { Delivery } from '../pubsub/delivery.js';
import { messageTail } from '../pubsub/frames.js';
import { isSendableFrom } from '../pubsub/sendable-payload.js';

/**
 * Live messages wait while the topic's last seq and then its last message are read; the
 * subscriber gets that message (when history still holds it), then the live ones after it.
 * Each seq once: a live message the read already had is dropped, and one that came after it is
 * sent after it, so a publish racing the read is neither doubled nor lost. When the read fails
 * the subscriber just starts live.
 */
export function sendLatest(
  broker: Broker,
  logger: Logger,
  topic: string,
  delivery: Delivery,
): void {
  delivery.pauseForReplay();
  void readLatest(broker, topic).then(
    (latest) => {
      if (latest === undefined) {
        delivery.resume(0, [], 0);
        return;
      }
      const { seq, payload, epoch } = latest;
      // One that cannot go into a frame is not sent: the next message tells of it as missed.
      const sendable = payload !== undefined && isSendableFrom(broker, payload);
      delivery.resume(
        0,
        sendable ? [{ tail: messageTail(payload, seq), seq }] : [],
        seq - 1,
        epoch,
      );
    },
    (err: unknown) => {
      logger.warn({ err, topic }, 'could not read the latest value: starting live');
      delivery.resume(0, [], 0);
    },
  );
}

/**
 * The topic's last message: its seq, and its payload while history holds it. Undefined when
 * nothing was ever published.
 */
async function readLatest(
  broker: Broker,
  topic: string,
): Promise<{ seq: number; payload: string | undefined; epoch: string | undefined } | undefined> {
  const { lastSeq } = await broker.history(topic, Number.MAX_SAFE_INTEGER);
  if (lastSeq < 1) return undefined;
  const page = await broker.history(topic, lastSeq - 1, 1);
  const message = page.messages[0];
  // Published to again between the two reads: the one read is still the last this subscriber
  // is owed before the live ones, which the delivery holds back from the first read on.
  if (message === undefined) return { seq: lastSeq, payload: undefined, epoch: page.epoch };
  return { seq: message.seq, payload: message.payload, epoch: page.epoch };
}
