// The `history` method: a topic's retained messages on demand, read through the broker with the
// same authorization as a subscribe, a page at a time. Apart from the service, which only
// checks the topic and hands over the connection's read slots.
import { MAX_BATCH_REPLY_CHARS } from '../peer/replies.js';
import { InternalError } from '../protocol/errors.js';
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
 * so many connections together cannot take the broker past that. The page is counted in `hold`
 * (its connection's HeldHistory) before it is parsed: refused there, the call reads nothing
 * more and parses nothing.
 */
export function readTopicHistory(
  reads: HistoryReads,
  slots: Slots,
  request: HistoryRequest,
  signal: AbortSignal,
  hold: PageHold,
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
      read(reading, request, hold)
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

  /** Stopped: what is left of the call is not worth doing. */
  get stopped(): boolean {
    return this.#stopped;
  }

  stop(): void {
    this.#stopped = true;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.cancel();
    waiting?.fail(new Error('history call cancelled'));
  }
}

async function read(
  reading: NodeReading,
  request: HistoryRequest,
  hold: PageHold,
): Promise<HistoryPage> {
  // Before the broker is read: a call that could not hold its page reads nothing.
  hold.checkRoom();
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
  await pageTurns.next();
  // Cancelled, its call has given back what it held: it takes nothing more.
  if (reading.stopped) throw new Error('history call cancelled');
  const kept = pageMessages(history.messages.slice(0, limit), MAX_HISTORY_PAGE_BYTES);
  hold.take(kept.bytes);
  return page(history, kept.messages, since, wanted);
}

/**
 * Turns of the event loop, one at a time: each `next` resolves in a turn of its own, after the
 * ones asked for before it. A page's check and parse (up to 4 MiB of JSON, a safe parse of each
 * message then a plain one: a tenth of a second or more) wait for one, so the pages of a
 * hundred calls, or of many connections, read together from a broker that answers at once, are
 * not all parsed in one task while every other connection waits.
 */
export class EventLoopTurns {
  /** In the order asked (a Set keeps insertion order, and lets go of the first in O(1)). */
  readonly #waiting = new Set<() => void>();
  #scheduled = false;

  next(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#waiting.add(resolve);
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // An immediate set while immediates run waits for the loop's next turn.
    setImmediate(() => {
      this.#scheduled = false;
      const [first] = this.#waiting;
      this.#waiting.delete(first!);
      if (this.#waiting.size > 0) this.#schedule();
      first!();
    });
  }
}

/** The process's history pages' turns (EventLoopTurns): one page parsed a turn. */
const pageTurns = new EventLoopTurns();

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
 * The messages a page answers, in one pass, none parsed yet: those that cannot be sent left out
 * (their seqs not there), ending before the one that would take the page's payloads past
 * `maxBytes` (UTF-8; the first whatever its size); `bytes`, their payloads' in all.
 */
function pageMessages(
  messages: History['messages'],
  maxBytes: number,
): { messages: History['messages']; bytes: number } {
  const kept: History['messages'] = [];
  let bytes = 0;
  for (const message of messages) {
    if (!isSendablePayload(message.payload)) continue;
    const size = Buffer.byteLength(message.payload, 'utf8');
    if (kept.length > 0 && bytes + size > maxBytes) break;
    bytes += size;
    kept.push(message);
  }
  return { messages: kept, bytes };
}

/**
 * The answer, `kept` (pageMessages) parsed: `truncated` when the first message held is past the
 * one asked for.
 */
function page(
  history: History,
  kept: History['messages'],
  since: number,
  wanted: number | undefined,
): HistoryPage {
  const messages = kept.map((m) => ({ seq: m.seq, data: JSON.parse(m.payload) as unknown }));
  const answer: HistoryPage = { messages, lastSeq: history.lastSeq };
  if (history.epoch !== undefined) answer.epoch = history.epoch;
  const first = history.messages[0]?.seq ?? history.lastSeq + 1;
  const asked = since + 1;
  const expected = wanted === undefined ? history.lastSeq >= asked : wanted > 0;
  if (expected && first > asked) answer.truncated = true;
  return answer;
}

/**
 * The most bytes of history pages (their messages' payloads, UTF-8) that one connection's
 * answered `history` calls hold while their replies wait to go out, and as many for all the
 * connections of one address group together. A lone call's reply goes out as soon as it is
 * made; a batch's waits for all its members, and MAX_BATCH_REPLY_CHARS (the same size) bounds
 * it only once every member has been answered: without this, a batch of a hundred calls of a
 * few bytes each has the gateway read, parse and hold a hundred pages of 4 MiB, most of them to
 * be thrown away.
 */
export const MAX_HISTORY_HELD_BYTES = MAX_BATCH_REPLY_CHARS;

/** Where one `history` call counts its page while its reply waits (readTopicHistory). */
export interface PageHold {
  /**
   * Throws (-32603 Reply too large) unless a whole page more (MAX_HISTORY_PAGE_BYTES) fits, or
   * nothing is held: asked before the broker is read, so a call refused reads nothing.
   */
  checkRoom(): void;
  /** Count the page's `bytes` before it is parsed; throws as checkRoom when they do not fit. */
  take(bytes: number): void;
}

/** One call's PageHold, and `release`, which gives back what it took: once, nothing after a clear. */
export interface CallHold extends PageHold {
  readonly release: () => void;
}

/** The history pages held (HeldHistory) by each address group's connections together. */
export class HistoryHeldByAddress {
  /** Only groups holding some: a connection's entry goes with its last page. */
  readonly #bytes = new Map<string, number>();

  bytesOf(group: string): number {
    return this.#bytes.get(group) ?? 0;
  }

  /** Count `bytes` more (fewer when negative) for `group`. */
  add(group: string, bytes: number): void {
    const total = this.bytesOf(group) + bytes;
    if (total > 0) this.#bytes.set(group, total);
    else this.#bytes.delete(group);
  }
}

/**
 * What one connection's answered history pages hold until their replies go out, within
 * MAX_HISTORY_HELD_BYTES for the connection and for its address group (`group`; none for a
 * pipe). A page is let go when its reply has been handed to the transport (`release`); one whose
 * reply never was (a batch member answered "Reply too large" for the batch's own bound, a call
 * cancelled once answered) stays counted until `clear`, which the service calls as a history
 * call starts while no call of the connection runs (every reply a page waited in has then gone
 * or been dropped) and when the connection closes.
 */
export class HeldHistory {
  #bytes = 0;
  /** Counts since the last `clear`: a release from before it has nothing to give back. */
  #generation = 0;

  constructor(
    private readonly addresses: HistoryHeldByAddress,
    private readonly group: string | undefined,
  ) {}

  get bytes(): number {
    return this.#bytes;
  }

  /** One call's hold (CallHold). */
  forCall(): CallHold {
    let taken = 0;
    let generation = this.#generation;
    return {
      checkRoom: () => this.#refuseBeyond(MAX_HISTORY_PAGE_BYTES),
      take: (bytes) => {
        // A page is taken whatever its size when nothing is held: a call can always be answered.
        this.#refuseBeyond(bytes);
        this.#add(bytes);
        taken += bytes;
        generation = this.#generation;
      },
      release: () => {
        if (generation === this.#generation) this.#add(-taken);
        taken = 0;
      },
    };
  }

  /** Forget every page counted: none of their replies can be waiting any more. */
  clear(): void {
    this.#add(-this.#bytes);
    this.#generation++;
  }

  #add(bytes: number): void {
    this.#bytes += bytes;
    if (this.group !== undefined) this.addresses.add(this.group, bytes);
  }

  /** Throws when `bytes` more would take the connection, or its address, past the bound. */
  #refuseBeyond(bytes: number): void {
    if (this.#bytes > 0 && this.#bytes + bytes > MAX_HISTORY_HELD_BYTES) {
      // What a batch's reply of the same size would answer them: the same error.
      throw new HeldHistoryRefusal({
        reason: 'batch reply too large',
        maxBatchReplyChars: MAX_BATCH_REPLY_CHARS,
      });
    }
    const address = this.group === undefined ? 0 : this.addresses.bytesOf(this.group);
    if (address > 0 && address + bytes > MAX_HISTORY_HELD_BYTES) {
      throw new HeldHistoryRefusal({
        reason: 'history held for this address',
        maxHistoryHeldBytes: MAX_HISTORY_HELD_BYTES,
      });
    }
  }
}

/** -32603 Reply too large: a page past what its connection, or its address, may hold. */
export class HeldHistoryRefusal extends InternalError {
  constructor(data: Record<string, unknown>) {
    super('Reply too large', data);
  }
}
