// A server API `history` page, bounded in bytes as well as in messages: up to `maxHistoryLimit`
// (100 000 at most) messages of up to a MiB each would make a reply, and what the gateway reads
// to write it, of a GiB and more. So the broker is read a client's page at a time
// (HISTORY_READ_PAGE), and the page ends before the message that would take it past
// `maxHistoryBytes`, `more` telling the caller to ask on from its last seq.
import type { History } from '../pubsub/broker.js';
import { isSendablePayload } from '../pubsub/sendable-payload.js';
import { pastUnsendable } from '../server/pubsub-history.js';
import type { NodeReading } from '../server/pubsub-history.js';

/**
 * The most messages one broker read of a page asks for: a client's `history` page, so a server
 * API call holds no more of the broker's answer at once than a client's call does.
 */
export const HISTORY_READ_PAGE = 100;

/** What `history` answers. */
export interface ApiHistoryPage {
  messages: { seq: number; data: unknown }[];
  lastSeq: number;
  epoch?: string;
  /** More retained after this page: ask again with since = the last seq here. */
  more: boolean;
}

/**
 * The messages of `topic` after `since`: at most `limit` read, and those that can be sent (the
 * others are left out, their seqs not there) within `maxBytes` of payload (UTF-8), the first
 * whatever its size, so that a caller always moves on. A read that meets a new numbering
 * (another epoch than the first read's) ends the page there, `more` set: the caller's next call
 * starts in it.
 */
export async function readApiHistoryPage(
  reading: NodeReading,
  topic: string,
  since: number,
  limit: number,
  maxBytes: number,
): Promise<ApiHistoryPage> {
  const messages: ApiHistoryPage['messages'] = [];
  let first: History | undefined;
  let lastSeq = 0;
  let after = since;
  let counted = 0;
  let bytes = 0;
  while (counted < limit) {
    const want = Math.min(HISTORY_READ_PAGE, limit - counted);
    const read = await pastUnsendable(await reading.history(topic, after, want), (seq) =>
      reading.history(topic, seq, want),
    );
    if (first === undefined) first = read;
    else if (read.epoch !== first.epoch) return answer(messages, first, lastSeq, true);
    lastSeq = read.lastSeq;
    for (const message of read.messages.slice(0, want)) {
      if (isSendablePayload(message.payload)) {
        const size = Buffer.byteLength(message.payload, 'utf8');
        if (messages.length > 0 && bytes + size > maxBytes) {
          return answer(messages, first, lastSeq, true);
        }
        bytes += size;
        messages.push({ seq: message.seq, data: JSON.parse(message.payload) as unknown });
      }
      counted++;
      after = message.seq;
    }
    // Fewer than asked: the topic's end, as this read saw it.
    if (read.messages.length < want) return answer(messages, first, lastSeq, false);
  }
  return answer(messages, first, lastSeq, after < lastSeq);
}

function answer(
  messages: ApiHistoryPage['messages'],
  first: History | undefined,
  lastSeq: number,
  more: boolean,
): ApiHistoryPage {
  return {
    messages,
    lastSeq,
    ...(first?.epoch === undefined ? {} : { epoch: first.epoch }),
    more,
  };
}
