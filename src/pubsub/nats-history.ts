/*
 * Reading a topic's retained messages from its JetStream stream, for clients that resume.
 * A one-off read through a short-lived consumer, apart from the live subscriptions.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { StreamInfo } from '@nats-io/jetstream';
import type { BrokerMessage, History } from './broker.js';
import { noop } from './nats-link.js';
import type { Link } from './nats-link.js';
import { isStreamNotFound } from './nats-streams.js';

const HISTORY_BATCH = 256;

/** The messages of `topic` (stream `stream`) after `afterSeq`, and its latest seq and epoch. */
export async function readHistory(
  link: Link,
  stream: string,
  topic: string,
  afterSeq: number,
): Promise<History> {
  let info: StreamInfo;
  try {
    info = await link.jsm.streams.info(stream);
  } catch (err) {
    if (isStreamNotFound(err)) return { messages: [], lastSeq: 0 };
    throw err;
  }
  const lastSeq = info.state.last_seq;
  const epoch = info.created;
  const messages: BrokerMessage[] = [];
  const after = Number.isFinite(afterSeq) ? Math.max(0, Math.floor(afterSeq)) : 0;
  let next = Math.max(after + 1, info.state.first_seq);
  if (next > lastSeq || info.state.messages === 0) return { messages, lastSeq, epoch };
  const consumer = await link.js.consumers.get(stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: next,
  });
  try {
    // Batches until the last sequence seen in stream info; a batch that comes back
    // short (older messages aged out meanwhile) ends at its expiry, not in a hang.
    while (next <= lastSeq) {
      const batch = await consumer.fetch({
        max_messages: Math.min(lastSeq - next + 1, HISTORY_BATCH),
        expires: 1_000,
      });
      let received = 0;
      for await (const m of batch) {
        received++;
        if (m.seq > lastSeq) continue;
        messages.push({ topic, seq: m.seq, payload: m.string(), epoch });
        next = m.seq + 1;
      }
      if (received === 0) break;
    }
  } finally {
    consumer.delete().catch(noop);
  }
  return { messages, lastSeq, epoch };
}
