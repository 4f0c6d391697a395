/*
 * Reading a topic's retained messages from its JetStream stream, for clients that resume.
 * A one-off read through a short-lived consumer, apart from the live subscriptions.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { StreamInfo } from '@nats-io/jetstream';
import type { BrokerMessage, History } from './broker.js';
import { exceptOf } from './nats-except.js';
import { noop } from './nats-link.js';
import type { Link } from './nats-link.js';
import { isStreamNotFound } from './nats-streams.js';

const HISTORY_BATCH = 256;
/** Empty batches in a row, the stream still holding what they asked for, before a read fails. */
const EMPTY_FETCHES = 3;

/**
 * The messages of `topic` (stream `stream`) after `afterSeq` (at most `limit` of them, the
 * oldest), and its latest seq and epoch. A topic without a stream has none: nothing is made.
 */
export async function readHistory(
  link: Link,
  stream: string,
  topic: string,
  afterSeq: number,
  limit?: number,
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
  if (next > lastSeq || info.state.messages === 0 || limit === 0) {
    return { messages, lastSeq, epoch };
  }
  // The last seq this read goes to: the stream's last one, or `limit` messages on (fewer when
  // some of them expire meanwhile: the read then ends short, at a batch's expiry).
  let upTo = limit === undefined ? lastSeq : Math.min(lastSeq, next + limit - 1);
  const consumer = await link.js.consumers.get(stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: next,
  });
  try {
    // Batches until the last sequence seen in stream info. A batch that comes back empty ends
    // at its expiry, not in a hang: the messages it asked for aged out meanwhile, or the
    // server was slower than the expiry. The stream tells which: a page cut short while the
    // stream still holds what follows would be told to a resuming subscriber as lost.
    let empty = 0;
    while (next <= upTo && (limit === undefined || messages.length < limit)) {
      const batch = await consumer.fetch({
        max_messages: Math.min(upTo - next + 1, HISTORY_BATCH),
        expires: 1_000,
      });
      let received = 0;
      for await (const m of batch) {
        received++;
        if (m.seq > upTo) {
          // The messages the page still asked for aged out (a short history, published past
          // meanwhile): it goes on from the oldest one held, as a read begun now would, up to
          // the last seq the read began with and within its limit; past those it ends here.
          // Waiting for seqs up to upTo would wait for what the stream no longer has.
          const room = limit === undefined ? Infinity : limit - messages.length;
          if (m.seq > lastSeq || room <= 0) {
            next = upTo + 1;
            continue;
          }
          upTo = Math.min(lastSeq, m.seq + room - 1);
        }
        // Whom it leaves out, as the live copy says it: a resuming session named there passes
        // it by. A malformed list leaves out nobody (the live copy's consumer reports it).
        const except = exceptOf(m.headers);
        messages.push(
          except === undefined || except === 'malformed'
            ? { topic, seq: m.seq, payload: m.string(), epoch }
            : { topic, seq: m.seq, payload: m.string(), epoch, except },
        );
        next = m.seq + 1;
      }
      if (received > 0) {
        empty = 0;
        continue;
      }
      let now: StreamInfo;
      try {
        now = await link.jsm.streams.info(stream);
      } catch (err) {
        if (isStreamNotFound(err)) break;
        throw err;
      }
      const { state } = now;
      // Aged out, or gone with the stream (made anew since): the page ends here. Aged out in
      // part: what is left of the range is read.
      if (state.messages === 0 || state.first_seq > upTo || now.created !== epoch) break;
      if (state.first_seq > next) {
        next = state.first_seq;
        continue;
      }
      if (++empty >= EMPTY_FETCHES) {
        throw new Error(
          `NATS broker: history of "${topic}" came back empty ${empty} times while the stream holds seq ${next}`,
        );
      }
    }
  } finally {
    consumer.delete().catch(noop);
  }
  return { messages, lastSeq, epoch };
}
