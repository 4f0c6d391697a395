// The `history` method: a topic's retained messages on demand, read through the broker with the
// same authorization as a subscribe, a page at a time. Apart from the service, which only
// checks the topic and hands over the connection's read slots.
import type { History } from '../pubsub/broker.js';
import { isSendablePayload } from '../pubsub/sendable-payload.js';
import type { HistoryReads } from '../pubsub/history-reads.js';
import type { HistoryRequest } from '../pubsub/history-params.js';
import type { Slots } from '../pubsub/slots.js';

/** What `history` answers. */
export interface HistoryPage {
  /** Oldest first, each with its seq; at most the call's `limit`. */
  messages: { seq: number; data: unknown }[];
  /** The topic's latest seq (0 when nothing was ever published). */
  lastSeq: number;
  /** The numbering the seqs belong to, when the broker names it. */
  epoch?: string;
  /** History no longer holds some of what was asked (trimmed by the topic's retention). */
  truncated?: true;
}

/**
 * Read what `request` asks of history, holding one of the connection's read slots
 * (`maxHistoryReadsPerConnection`) for the whole read: `last` takes two reads (the latest seq,
 * then the page before it), `since` one. Each read goes through the node's reads (`reads`: at
 * most `maxHistoryReads` at the broker at once, identical ones shared), as resume replays do,
 * so many connections together cannot take the broker past that.
 */
export function readTopicHistory(
  reads: HistoryReads,
  slots: Slots,
  request: HistoryRequest,
  signal: AbortSignal,
): Promise<HistoryPage> {
  return new Promise<HistoryPage>((resolve, reject) => {
    let giveUp: (() => void) | undefined;
    const onAbort = (): void => {
      giveUp?.();
      reject(signal.reason as Error);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    let granted = false;
    const leaveQueue = slots.take((release) => {
      granted = true;
      const reading = new NodeReading(reads);
      giveUp = () => reading.stop();
      read(reading, request)
        .then(resolve, reject)
        .finally(() => {
          release();
          signal.removeEventListener('abort', onAbort);
        });
    });
    // Granted at once, `giveUp` is already the read's; else it leaves the connection's queue.
    if (!granted) giveUp = leaveQueue;
  });
}

/**
 * One `history` call's reads through the node's, one at a time. `stop` (the call cancelled)
 * gives up the read it waits for, which is then not sent if no one else waits for it, and
 * fails it here, so that the connection's slot comes back.
 */
export class NodeReading {
  readonly #mark: number;
  #waiting: { cancel: () => void; fail: (error: Error) => void } | undefined;
  /** Stopped: a read asked for after that (a `last` call's second) is failed, never sent. */
  #stopped = false;

  constructor(private readonly reads: HistoryReads) {
    this.#mark = reads.mark();
  }

  history(topic: string, afterSeq: number, limit: number): Promise<History> {
    if (this.#stopped) return Promise.reject(new Error('history call cancelled'));
    return new Promise<History>((resolve, reject) => {
      const cancel = this.reads.read(topic, afterSeq, limit, this.#mark, (error, history) => {
        this.#waiting = undefined;
        if (history) resolve(history);
        else reject(error instanceof Error ? error : new Error('history read failed'));
      });
      this.#waiting = { cancel, fail: reject };
    });
  }

  stop(): void {
    this.#stopped = true;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.cancel();
    waiting?.fail(new Error('history call cancelled'));
  }
}

async function read(reading: NodeReading, request: HistoryRequest): Promise<HistoryPage> {
  const { topic, limit } = request;
  let since = request.since;
  let wanted: number | undefined;
  if (since === undefined) {
    const last = Math.min(request.last ?? limit, limit);
    // After the last possible seq: no messages, only the topic's latest seq.
    const { lastSeq } = await reading.history(topic, Number.MAX_SAFE_INTEGER, 1);
    since = Math.max(0, lastSeq - last);
    wanted = lastSeq - since;
  }
  const history = await pastUnsendable(await reading.history(topic, since, limit), (after) =>
    reading.history(topic, after, limit),
  );
  return page(history, since, limit, wanted);
}

/**
 * `history`, or, when it is a page of nothing but messages that cannot be sent (which would
 * leave a caller no seq to ask on from), the first page `readAfter` reads past it that holds
 * one that can be, or reaches the topic's end.
 */
export async function pastUnsendable(
  history: History,
  readAfter: (seq: number) => Promise<History>,
): Promise<History> {
  for (let after = unsendablePageEnd(history); after !== undefined;) {
    history = await readAfter(after);
    after = unsendablePageEnd(history);
  }
  return history;
}

/**
 * The last seq of a page that holds messages, none of which can be sent (isSendablePayload),
 * before the topic's end: where to read on from. Undefined for any other page.
 */
function unsendablePageEnd(history: History): number | undefined {
  const last = history.messages.at(-1)?.seq;
  if (last === undefined || last >= history.lastSeq) return undefined;
  return history.messages.some((m) => isSendablePayload(m.payload)) ? undefined : last;
}

/**
 * The most payload (UTF-8 bytes) one `history` page carries: the page ends before the message
 * that would take it past, the first message whatever its size, and the caller asks on from
 * its last seq (it is below `lastSeq`). A hundred messages of up to `maxMessageBytes` each would
 * make a reply of a hundred MiB, and a batch of such calls many times that, for a request of a
 * few bytes (the server API's pages have the same bound, `maxHistoryBytes`).
 */
export const MAX_HISTORY_PAGE_BYTES = 4 * 1024 * 1024;

/**
 * A page's messages as a history answer gives them, in one pass: those that cannot be sent left
 * out (their seqs not there), ending before the one that would take the page's payloads past
 * `maxBytes` (UTF-8; the first whatever its size).
 */
function pageMessages(
  messages: History['messages'],
  maxBytes: number,
): { seq: number; data: unknown }[] {
  const kept: { seq: number; data: unknown }[] = [];
  let bytes = 0;
  for (const message of messages) {
    if (!isSendablePayload(message.payload)) continue;
    const size = Buffer.byteLength(message.payload, 'utf8');
    if (kept.length > 0 && bytes + size > maxBytes) break;
    bytes += size;
    kept.push({ seq: message.seq, data: JSON.parse(message.payload) as unknown });
  }
  return kept;
}

/** The answer: `truncated` when the first message held is past the one asked for. */
function page(
  history: History,
  since: number,
  limit: number,
  wanted: number | undefined,
): HistoryPage {
  // A message that cannot go into a frame is left out of the page (its seq is not there).
  const messages = pageMessages(history.messages.slice(0, limit), MAX_HISTORY_PAGE_BYTES);
  const answer: HistoryPage = { messages, lastSeq: history.lastSeq };
  if (history.epoch !== undefined) answer.epoch = history.epoch;
  const first = history.messages[0]?.seq ?? history.lastSeq + 1;
  const asked = since + 1;
  const expected = wanted === undefined ? history.lastSeq >= asked : wanted > 0;
  if (expected && first > asked) answer.truncated = true;
  return answer;
}
