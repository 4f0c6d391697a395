// Where a topic subscriber starts: its position (`position: true`) or a resume from `since`,
// with the gap and epoch decisions that go with it. Apart from the service because it is the
// one part that reasons about the broker's numbering; the service only picks which to run.
import type { Logger } from '../peer/logger.js';
import type { Broker, History } from '../pubsub/broker.js';
import type { Delivery, ReplayStep } from '../pubsub/delivery.js';
import { messageTail } from '../pubsub/frames.js';
import { isSendableFrom } from '../pubsub/sendable-payload.js';
import type { DrainWaiters } from '../pubsub/drain-waiters.js';
import { LinkWaiters } from '../pubsub/link-waiters.js';
import { subscriberReads } from './subscriber-reads.js';
import type { SubscriberReadLimits } from './subscriber-reads.js';

/** A topic's last seq and epoch as read for a subscriber that asked for its position. */
export interface Placement {
  readonly lastSeq: number;
  readonly epoch: string | undefined;
}

/**
 * Read where a subscriber that asked for its position starts, holding its live messages until
 * `tellPosition`. Called in the turn the subscription joins the topic, so that every message
 * after the one read is either held or counted in the read. The read waits its turn as a
 * replay's pages do (`limits`: the connection's slots, the node's reads); live messages are
 * held meanwhile, and the position is still exact when it comes. Resolves to undefined when the
 * subscription ended first (nothing left waiting); rejects when the broker could not say, and
 * the subscribe is then refused (-32009) rather than started without the position it asked for.
 */
export function readPosition(
  broker: Broker,
  topic: string,
  delivery: Delivery,
  limits: SubscriberReadLimits = {},
): Promise<Placement | undefined> {
  delivery.pauseForReplay();
  // After the last possible seq: no messages, only the topic's latest seq. The same read for
  // every subscriber of the topic, so those waiting together share one.
  const read = subscriberReads(broker, topic, delivery, limits);
  return read(Number.MAX_SAFE_INTEGER, 1).then(
    (history) => history && { lastSeq: history.lastSeq, epoch: history.epoch },
  );
}

/**
 * Tell the subscriber where it starts: `{"subscription": id, "seq": N, "epoch": E}`, N being
 * the last message it will not get and E the broker's name for the topic's numbering (when
 * it has one), then release the messages held since `readPosition`. N is exact: a message
 * held meanwhile that the read already counted is delivered, the position put just before it.
 */
export function tellPosition(delivery: Delivery, placement: Placement | undefined): void {
  if (placement === undefined) {
    // The subscription ended while its position was read: nothing waits for it.
    delivery.resume(0, [], 0);
    return;
  }
  const { lastSeq, epoch } = placement;
  const position = Math.min(lastSeq, (delivery.firstWaitingSeq ?? lastSeq + 1) - 1);
  delivery.sendPosition(position, epoch);
  delivery.resume(0, [], position, epoch);
}

/** How a replay reads history: through the node's shared, bounded reads and the connection's slots. */
export interface ReplayReads extends SubscriberReadLimits {
  /** The connection's drain waiters (one socket listener for all its replays). */
  drains?: DrainWaiters;
  /** Messages in the first page. Default FIRST_PAGE. */
  firstPage?: number;
}

/** Messages in a replay's first page; later pages are sized to about the high-water mark. */
export const FIRST_PAGE = 100;
/**
 * History reads of one page that may fail in a row with the broker's link up before the replay
 * gives up on history (the broker answers, but cannot read it): what it could not read is told
 * as a gap. Reads that fail while the link is down do not count: the replay waits for the link.
 */
export const READ_ATTEMPTS = 3;
/** The most messages one page reads. */
export const MAX_PAGE = 1_000;

/**
 * The size of the page after one of `count` messages that took `chars` characters of frame
 * text: about the subscriber's high-water mark. The same inputs give the same size, so
 * subscribers replaying a topic in step keep reading the same pages (shared reads).
 */
export function nextPageSize(count: number, chars: number, highWaterMark: number): number {
  if (chars <= 0) return MAX_PAGE;
  return Math.max(1, Math.min(MAX_PAGE, Math.floor((count * highWaterMark) / chars)));
}

/**
 * Resume: live messages wait while history after `since` is fetched; then the
 * subscriber gets a gap signal if history no longer reaches back that far, the
 * retained messages, and the live ones, each sequence number once.
 *
 * History is read a page at a time, and the next page only once the subscriber's socket has
 * drained below its high-water mark: a subscriber that does not read what it is sent costs
 * the broker one page, not the topic's whole history. Each page is read holding one of the
 * connection's slots (`maxHistoryReadsPerConnection`), through the node's reads (at most
 * `maxHistoryReads` at once; identical reads made together are one). The replay ends with
 * the page that reaches the topic's last seq, or the oldest live message held back.
 *
 * When `since` cannot belong to the broker's numbering (it is past the topic's last
 * sequence number, or the client's epoch is not the topic's), the broker lost the topic and
 * numbers it anew: the subscriber gets a gap signal of unknown size (`null`) with the new
 * epoch, then everything history holds, then the live messages. The same when the topic is
 * numbered anew while the replay reads it (a page, or the live messages held back, in a new
 * epoch): told, then the new numbering's history from its start, then its live messages.
 *
 * A read that fails while the broker's link is down waits for the link to be back (the broker
 * reconnects by itself; `onRelinked`, or `ready` again) and is made again, from where the
 * replay stands: the subscription's live messages wait as during any replay (the node gets
 * none while its link is down), and nothing the broker still holds is told as missing. Only
 * when reads keep failing with the link up (READ_ATTEMPTS in a row) is the rest given up: a
 * gap signal of unknown size when the first page could not be read, else the count of what
 * was not read, before the next live message.
 */
export function replay(
  broker: Broker,
  logger: Logger,
  topic: string,
  since: number,
  clientEpoch: string | undefined,
  delivery: Delivery,
  options: ReplayReads = {},
): void {
  delivery.pauseForReplay(since);
  const { reads, drains } = options;
  const link = reads?.link ?? new LinkWaiters(broker);
  const readHeld = subscriberReads(broker, topic, delivery, options);
  // A page is read once the socket has room for it (undefined: the subscription ended).
  const readOnce = async (afterSeq: number, limit: number): Promise<History | undefined> =>
    (await whenWritable(delivery, drains)) ? readHeld(afterSeq, limit) : undefined;
  const read = (afterSeq: number, limit: number): Promise<History | undefined> =>
    readThroughOutages(readOnce, afterSeq, limit, broker, link, delivery, logger, topic);
  const writable = (): Promise<boolean> => whenWritable(delivery, drains);
  const firstPage = Math.max(1, Math.floor(options.firstPage ?? FIRST_PAGE));
  void runReplay(
    read,
    writable,
    firstPage,
    logger,
    broker,
    topic,
    since,
    clientEpoch,
    delivery,
  ).catch((err: unknown) => logger.warn({ err, topic }, 'replay failed'));
}

async function runReplay(
  read: (afterSeq: number, limit: number) => Promise<History | undefined>,
  writable: () => Promise<boolean>,
  firstPage: number,
  logger: Logger,
  /** Whose payloads are checked before they go into frames (isSendableFrom). */
  broker: Pick<Broker, 'trustedPayloads'>,
  topic: string,
  since: number,
  clientEpoch: string | undefined,
  delivery: Delivery,
): Promise<void> {
  let page = firstPage;
  let start: { gap: number | null; floorSeq: number | undefined; history: History } | undefined;
  try {
    start = await readStart(read, page, since, clientEpoch, delivery);
  } catch (err) {
    logger.warn({ err, topic }, 'history unavailable: resuming live only');
    // How much was lost is unknown: say so rather than pretend nothing was.
    delivery.resume(null, []);
    return;
  }
  if (!start) return; // the subscription ended
  let history = start.history;
  let step = delivery.replayBegin(start.gap, start.floorSeq, history.epoch, true);
  for (;;) {
    if (step === 'over') return;
    if (step === 'renumbered') {
      // Told: the new numbering is read from its start, its live messages held behind it.
      let all: History | undefined;
      try {
        all = await read(0, firstPage);
      } catch (err) {
        logger.warn({ err, topic }, 'history unavailable: the rest of the replay is skipped');
        step = await end(writable, delivery);
        continue;
      }
      if (!all) return; // the subscription ended
      history = all;
    }
    // A message that cannot go into a frame is left out: the subscriber is told of it as of a
    // message lost (the next one's gap signal or `missed`).
    const tails = history.messages
      .filter((m) => isSendableFrom(broker, m.payload))
      .map((m) => ({ tail: messageTail(m.payload, m.seq), seq: m.seq, except: m.except }));
    if (tails.length < history.messages.length) {
      logger.warn({ topic }, 'history holds messages that are not one JSON value: left out');
    }
    step = delivery.replayPage(tails, history.epoch);
    if (step !== 'more') continue;
    const cursor = history.messages.at(-1)?.seq;
    const oldestHeld = delivery.oldestWaitingSeq;
    // Done: history had nothing more, or this page reached the topic's last seq (when it was
    // read), or the live messages held back (they follow on from here).
    if (
      cursor === undefined ||
      cursor >= history.lastSeq ||
      (oldestHeld !== undefined && cursor >= oldestHeld - 1)
    ) {
      step = await end(writable, delivery);
      continue;
    }
    page = nextPageSize(
      tails.length,
      tails.reduce((sum, t) => sum + t.tail.length, 0),
      delivery.highWaterMark,
    );
    let next: History | undefined;
    try {
      next = await read(cursor, page);
    } catch (err) {
      // What was not read is told as a gap (counted) before the next live message.
      logger.warn({ err, topic }, 'history unavailable: the rest of the replay is skipped');
      step = await end(writable, delivery);
      continue;
    }
    if (!next) return; // the subscription ended
    history = next;
  }
}

/**
 * The replay's end: the live messages held back go out as a page does, once the socket has
 * room. `renumbered` when the numbering restarted meanwhile (read on from its start).
 */
async function end(writable: () => Promise<boolean>, delivery: Delivery): Promise<ReplayStep> {
  if (!(await writable())) return 'over';
  return delivery.replayEnd();
}

/**
 * One page of history, read again while the broker's link is down and when it is back: a read
 * that fails with the link down waits for it (LinkWaiters) and is made again; one that fails
 * with the link up is made again at once, READ_ATTEMPTS times in a row at most, then its error
 * is thrown. Undefined when the subscription stopped meanwhile (nothing left waiting).
 */
async function readThroughOutages(
  readOnce: (afterSeq: number, limit: number) => Promise<History | undefined>,
  afterSeq: number,
  limit: number,
  broker: Pick<Broker, 'ready'>,
  link: LinkWaiters,
  delivery: Delivery,
  logger: Logger,
  topic: string,
): Promise<History | undefined> {
  let failedLinked = 0;
  for (;;) {
    try {
      return await readOnce(afterSeq, limit);
    } catch (err) {
      // A broker client may learn that its link dropped just after the read failed with it.
      await new Promise((resolve) => setImmediate(resolve));
      if (broker.ready) {
        if (++failedLinked >= READ_ATTEMPTS) throw err;
        continue;
      }
      logger.info({ err, topic, afterSeq }, 'history read failed with the broker down: waiting');
      if (!(await whenLinked(delivery, link))) return undefined;
    }
  }
}

/**
 * Resolves true once the broker's link is up (told by `link`), false when the subscription
 * stops first (then nothing is left waiting).
 */
function whenLinked(delivery: Delivery, link: LinkWaiters): Promise<boolean> {
  if (delivery.isStopped) return Promise.resolve(false);
  return new Promise((resolve) => {
    const stopWaiting = link.wait(() => done(true));
    const offStop = delivery.onStop(() => done(false));
    function done(linked: boolean): void {
      offStop();
      stopWaiting();
      resolve(linked && !delivery.isStopped);
    }
  });
}

/** The first page, and the gap and floor it implies (another numbering: read from its start). */
async function readStart(
  read: (afterSeq: number, limit: number) => Promise<History | undefined>,
  page: number,
  since: number,
  clientEpoch: string | undefined,
  delivery: Delivery,
): Promise<{ gap: number | null; floorSeq: number | undefined; history: History } | undefined> {
  const first = await read(since, page);
  if (!first) return undefined;
  const { messages, lastSeq, epoch } = first;
  const otherEpoch = clientEpoch !== undefined && epoch !== undefined && clientEpoch !== epoch;
  if (since <= lastSeq && !otherEpoch) {
    const firstAvailable = messages[0]?.seq ?? lastSeq + 1;
    return { gap: Math.max(0, firstAvailable - (since + 1)), floorSeq: undefined, history: first };
  }
  // Another numbering: the client's position (and epoch) mean nothing here. Keep every live
  // message from now on, and read history from its start.
  delivery.resetFloor();
  delivery.clientEpoch = undefined;
  const all = await read(0, page);
  return all && { gap: null, floorSeq: 0, history: all };
}

/**
 * Resolves true once the subscriber's socket is below its high-water mark (at once when it
 * is), false when the subscription stops first (then nothing is left waiting).
 */
function whenWritable(delivery: Delivery, drains: DrainWaiters | undefined): Promise<boolean> {
  if (delivery.isStopped) return Promise.resolve(false);
  if (delivery.belowHighWaterMark) return Promise.resolve(true);
  return new Promise((resolve) => {
    const stopWaiting = drains
      ? drains.wait(() => done(true))
      : delivery.onSinkDrain(() => done(true));
    const offStop = delivery.onStop(() => done(false));
    function done(writable: boolean): void {
      offStop();
      stopWaiting();
      resolve(writable && !delivery.isStopped);
    }
  });
}
