import { epochTail, gapTail, missedPart, positionTail } from './frames.js';
import type { SharedFrame } from './frames.js';
import { Fifo } from './fifo.js';
import { PassedSeqs } from './passed-seqs.js';
import type { Sink } from './sink.js';

/**
 * What to do when a subscriber's socket has more than `highWaterMark` bytes
 * waiting: skip messages and report how many were missed (`drop`), hold only
 * the newest and send it when the socket drains (`keep-latest`), or close the
 * connection with 1013 (`disconnect`).
 */
export type SlowConsumerPolicy = 'drop' | 'keep-latest' | 'disconnect';

export interface FlowControl {
  slowConsumer: SlowConsumerPolicy;
  /** Bytes buffered for the socket beyond which the policy applies. */
  highWaterMark: number;
}

export const defaultFlowControl: FlowControl = { slowConsumer: 'drop', highWaterMark: 1024 * 1024 };

export const SLOW_CONSUMER_CLOSE_CODE = 1013;

/**
 * What every subscription of a topic on a node shares: its frames' head, its flow control and
 * the slow-consumer counter. One object per topic (pubsub-service.ts keeps one per FlowControl),
 * so that each subscription holds one reference for the three.
 */
export interface DeliveryRoute {
  /** The frames' opening, up to the subscription id (notificationHead). */
  readonly head: string;
  readonly flow: FlowControl;
  /** Told of each message skipped, and of a disconnect, for metrics. */
  readonly onSlowConsumer: (event: 'dropped' | 'disconnected') => void;
}

/**
 * The message a `keep-latest` subscription holds while its socket is over the high-water mark,
 * and the wait for the socket to drain that sends it. Made when one is first held.
 */
interface Held {
  tail: string;
  seq: number | undefined;
  cancelDrain: () => void;
}

/**
 * `lastSeq` while unknown, as stored. A small integer, so the field stays one in every Delivery
 * (NaN, a double, would give each its own boxed number). Sequence numbers are never negative (a
 * `$`-topic's are 0), so `UNKNOWN_SEQ + 1` is none of them: the hot paths compare a seq with the
 * stored value + 1 directly, which fails while unknown as a comparison with NaN does.
 */
const UNKNOWN_SEQ = -2;

/**
 * Live messages held for one subscription while its history is replayed: at most this many,
 * and at most the topic's `highWaterMark` in characters of frame text; beyond either, the
 * topic's slow-consumer policy applies to the backlog.
 */
const MAX_WAITING = 10_000;

/** `Delivery.flags`: the subscription has stopped. */
const STOPPED = 1;
/** `Delivery.flags`: the subscriber tracks positions (`resumable`). */
const RESUMABLE = 2;
/** The lowest `Delivery.flags` bit a subclass may use for its own. */
export const FIRST_SUBCLASS_FLAG = 4;

/**
 * Times one paged replay starts over in a new numbering (see ReplayStep); past it, a further
 * restart ends the replay as one in one go does. A topic renumbered again and again (or live
 * messages and history that keep naming different epochs) cannot keep a replay going.
 */
const MAX_RENUMBERS = 3;

/** A message of history as a replay writes it: its frame's tail, its seq, whom it was not for. */
export interface ReplayedMessage {
  readonly tail: string;
  readonly seq: number;
  /** Session ids it was published `except`. */
  readonly except?: readonly string[];
}

/**
 * Where a replay stands after one of its steps (`replayBegin`, `replayPage`, `replayEnd`):
 *   - `more`: go on (the next page, or the end);
 *   - `over`: stopped, or ended (the live messages held back have followed);
 *   - `renumbered` (a paged replay only): the topic was numbered anew (a new epoch) since the
 *     replay began. The subscriber has been told (`{"gap":null,"epoch":<new>}`); the replay is
 *     to read the new numbering's history from its start (after seq 0) and go on from there,
 *     the live messages of the new numbering still held behind it, so that nothing the broker
 *     holds of it is told as missing.
 */
export type ReplayStep = 'more' | 'over' | 'renumbered';

interface Waiting {
  tail: string;
  shared: SharedFrame | undefined;
  seq: number | undefined;
  /** Messages dropped from the backlog just before this one (reported with it as `missed`). */
  missedBefore: number;
}

/**
 * A replay under way, from `pauseForReplay` to its end: apart from the Delivery, which most of
 * the time has none, so that a subscription does not carry these fields for its whole life.
 */
interface Replay {
  /** Live messages that arrive while history is being replayed, sent after it. */
  waiting: Fifo<Waiting> | undefined;
  /** Characters of frame text in `waiting`. */
  waitingChars: number;
  /** The first live message held since `pauseForReplay` (even if dropped from the backlog since). */
  firstHeldSeq: number | undefined;
  /**
   * Set when the topic's numbering restarted during a replay: what was read is void, unless it
   * was read in the new numbering (`epoch`, when the restart named a new one: not `rewound`).
   */
  restarted: { epoch: string | undefined; rewound: boolean } | undefined;
  /** An epoch learned from live messages while a replay was going on (told at `resume`). */
  learnedEpoch: string | undefined;
  /** The epoch of the history a paged replay reads (set by `replayBegin`). */
  epoch: string | undefined;
  /** The replay reads history a page at a time, and can start over in a new numbering. */
  paged: boolean;
  /** Times it started over in a new numbering (at most MAX_RENUMBERS). */
  renumbers: number;
}

/**
 * Messages skipped under the 'drop' policy wait to be told with the next message written; should
 * none come, the socket's drain tells them (tellDropped). `seq`: the last one skipped, if numbered.
 */
interface DropWatch {
  seq: number | undefined;
  cancelDrain: () => void;
}

/** Delivery's rare state: see its `rare` field. */
interface RareState {
  held: Held | undefined;
  passed: PassedSeqs | undefined;
  replay: Replay | undefined;
  stopListeners: Set<() => void> | undefined;
  dropWatch: DropWatch | undefined;
}

function newRareState(): RareState {
  return {
    held: undefined,
    passed: undefined,
    replay: undefined,
    stopListeners: undefined,
    dropWatch: undefined,
  };
}

function newReplay(waiting: Fifo<Waiting> | undefined): Replay {
  return {
    waiting,
    waitingChars: 0,
    firstHeldSeq: undefined,
    restarted: undefined,
    learnedEpoch: undefined,
    epoch: undefined,
    paged: false,
    renumbers: 0,
  };
}

/**
 * One subscription's outbound path. The socket's buffered bytes are checked
 * before every frame, so a stalled subscriber costs at most one high-water
 * mark of memory (plus one held message) and never delays anyone else.
 *
 * It also accounts for every sequence number: what it writes follows on from what the
 * subscriber was told (its position, a resume's gap and history, the messages written), so a
 * message whose seq skips past the last accounted one (+ the `missed` pending) reveals
 * messages this node never received (its broker link was down longer than the topic's history
 * reaches). A subscriber that tracks positions gets a gap signal for them before the message;
 * any other one gets them counted in the message's `missed`. Nothing passes silently.
 */
export class Delivery<R extends DeliveryRoute = DeliveryRoute> {
  /** Messages skipped since the last one sent; reported on the next. */
  missed = 0;
  /**
   * What only some subscriptions have, and only for a while: a held message, seqs passed by, a
   * replay under way, stop listeners. One field for the four, made when the first is and dropped
   * once none is left, rather than four on every subscription a gateway keeps.
   */
  private rare: RareState | undefined;
  /** `lastSeq` as stored: UNKNOWN_SEQ while unknown. */
  private seqSeen = UNKNOWN_SEQ;
  /**
   * STOPPED, RESUMABLE, and bits from FIRST_SUBCLASS_FLAG up for a subclass's own: one small
   * integer rather than a field each, on every subscription a gateway holds.
   */
  protected flags = 0;
  /** Sequence numbers up to this one were already sent (resume): later duplicates are dropped. */
  private floorSeq = 0;
  /** The epoch the subscriber's sequence numbers belong to, as it told us or we told it. */
  clientEpoch: string | undefined;

  constructor(
    private readonly sink: Sink,
    /** The topic's head, flow control and slow-consumer counter, shared by its subscriptions. */
    protected readonly route: R,
    private readonly quotedId: string,
  ) {}

  /** The newest message held (`keep-latest`) until the socket drains. */
  private get held(): Held | undefined {
    return this.rare?.held;
  }

  private set held(held: Held | undefined) {
    this.setRare('held', held);
  }

  /** Seqs passed by (`pass`) after the last one accounted for, oldest first. */
  private get passed(): PassedSeqs | undefined {
    return this.rare?.passed;
  }

  private set passed(passed: PassedSeqs | undefined) {
    this.setRare('passed', passed);
  }

  /** The replay under way, if any; with `waiting`, live messages are held back for it. */
  private get replay(): Replay | undefined {
    return this.rare?.replay;
  }

  private set replay(replay: Replay | undefined) {
    this.setRare('replay', replay);
  }

  private get dropWatch(): DropWatch | undefined {
    return this.rare?.dropWatch;
  }

  private set dropWatch(watch: DropWatch | undefined) {
    this.setRare('dropWatch', watch);
  }

  /** Told when the subscription stops (a replay waiting for the socket or a read gives up). */
  private get stopListeners(): Set<() => void> | undefined {
    return this.rare?.stopListeners;
  }

  private set stopListeners(listeners: Set<() => void> | undefined) {
    this.setRare('stopListeners', listeners);
  }

  private setRare<K extends keyof RareState>(key: K, value: RareState[K]): void {
    const rare = this.rare;
    if (value !== undefined) {
      (this.rare ??= newRareState())[key] = value;
    } else if (rare !== undefined) {
      rare[key] = value;
      if (
        rare.held === undefined &&
        rare.passed === undefined &&
        rare.replay === undefined &&
        rare.stopListeners === undefined &&
        rare.dropWatch === undefined
      ) {
        this.rare = undefined;
      }
    }
  }

  /**
   * The subscriber tracks positions (it subscribed with `since` or `position`): it is told
   * which epoch its sequence numbers belong to, and, with a gap signal, when the broker's
   * numbering restarts. Other clients of the convention expect every notification to carry
   * a result, so they are told nothing.
   */
  get resumable(): boolean {
    return (this.flags & RESUMABLE) !== 0;
  }

  set resumable(resumable: boolean) {
    this.flags = resumable ? this.flags | RESUMABLE : this.flags & ~RESUMABLE;
  }

  /** The session the subscription belongs to (its sink's): a message published `except` it passes it by. */
  get ownerId(): string | undefined {
    return this.sink.id;
  }

  private get stopped(): boolean {
    return (this.flags & STOPPED) !== 0;
  }

  /**
   * The last sequence number the subscriber has accounted for: written to it, or covered by a
   * gap signal, or (once the next message carries them) by `missed`. NaN while unknown (a
   * subscriber that was told no position, an unknown gap): every comparison with it is false,
   * so the next message written sets it without a check. Setting NaN makes it unknown.
   */
  private get lastSeq(): number {
    const seq = this.seqSeen;
    return seq === UNKNOWN_SEQ ? Number.NaN : seq;
  }

  private set lastSeq(seq: number) {
    this.seqSeen = Number.isNaN(seq) ? UNKNOWN_SEQ : seq;
  }

  private get flow(): FlowControl {
    return this.route.flow;
  }

  /**
   * A message not meant for this subscriber (published `except` its session): not written, but
   * its seq is accounted for. A subscriber that tracks positions checks every seq, so it is told
   * its new position instead (`{"seq": N}`, the frame a subscribe starts with): its numbering
   * stays whole, and a resume after it does not bring the message back. Another subscriber is
   * told nothing; its next message shows no hole. Seqs passed while something is held or
   * replayed wait, as numbers, for the next write (at most MAX_WAITING: beyond, the oldest count
   * as missed, never as lost silently), which tells a position-tracking subscriber its position
   * first. During a replay, one at or below the floor is kept too: the floor is the client's
   * `since`, which the replay may find the numbering never reached (it then starts from 0).
   */
  pass(seq: number): void {
    if (this.stopped) return;
    if (seq <= this.floorSeq && this.replay?.waiting === undefined) return;
    if (
      this.replay?.waiting === undefined &&
      this.held === undefined &&
      this.missed === 0 &&
      seq === this.seqSeen + 1
    ) {
      if (this.resumable) this.sendRaw(positionTail(seq, this.clientEpoch));
      this.seqSeen = seq;
      return;
    }
    (this.passed ??= new PassedSeqs(MAX_WAITING)).push(seq);
  }

  /**
   * Offer one message (its shared tail, and the whole frame when this
   * subscription uses the topic's shared id); sent now, held, skipped or fatal, by policy.
   */
  offer(tail: string, shared?: SharedFrame, seq?: number): void {
    if (this.stopped) return;
    if (seq !== undefined && seq <= this.floorSeq) return;
    const replay = this.replay;
    if (replay?.waiting) {
      this.hold(replay, replay.waiting, { tail, shared, seq, missedBefore: 0 });
      return;
    }
    if (this.sink.bufferedAmount < this.flow.highWaterMark) {
      if (this.held !== undefined) {
        // Something newer is here: the held message is superseded.
        this.dropHeld();
        this.skip();
      }
      // The common case: the next seq, nothing skipped, the topic's shared id.
      if (
        seq === this.seqSeen + 1 &&
        this.missed === 0 &&
        shared !== undefined &&
        shared.quotedId === this.quotedId
      ) {
        this.seqSeen = seq;
        this.sink.send(shared, this);
        return;
      }
      this.write(tail, seq, shared);
      return;
    }
    switch (this.flow.slowConsumer) {
      case 'drop':
        this.skip();
        // A subscriber that tracks positions takes gap signals: it need not wait for a next
        // message to hear of this one. Another one learns of it from the next message's `missed`.
        if (this.resumable) this.watchDrain(seq);
        return;
      case 'keep-latest': {
        const held = this.held;
        if (held === undefined) {
          this.held = { tail, seq, cancelDrain: this.sink.onDrain(() => this.flushHeld()) };
        } else {
          this.skip();
          held.tail = tail;
          held.seq = seq;
        }
        return;
      }
      case 'disconnect':
        this.disconnect();
        return;
    }
  }

  /**
   * Keep a live message until the replay is over. The backlog is bounded like a socket
   * buffer: past `highWaterMark` characters (or MAX_WAITING messages) the policy applies to
   * it: the oldest are dropped (`drop`), only the newest is kept (`keep-latest`), or the
   * connection is closed (`disconnect`). Dropped messages are reported, as `missed`, with
   * the message that followed them.
   */
  private hold(replay: Replay, waiting: Fifo<Waiting>, entry: Waiting): void {
    if (waiting.length === 0 && replay.firstHeldSeq === undefined) replay.firstHeldSeq = entry.seq;
    waiting.push(entry);
    this.setWaitingChars(replay, replay.waitingChars + entry.tail.length);
    if (replay.waitingChars <= this.flow.highWaterMark && waiting.length <= MAX_WAITING) return;
    if (this.flow.slowConsumer === 'disconnect') {
      this.disconnect();
      return;
    }
    const keepOne = this.flow.slowConsumer === 'keep-latest';
    while (
      waiting.length > 1 &&
      (keepOne || replay.waitingChars > this.flow.highWaterMark || waiting.length > MAX_WAITING)
    ) {
      const dropped = waiting.shift()!;
      this.setWaitingChars(replay, replay.waitingChars - dropped.tail.length);
      waiting.peek()!.missedBefore += dropped.missedBefore + 1;
      this.route.onSlowConsumer('dropped');
    }
  }

  /**
   * The client already has everything up to `afterSeq` (a resume's `since`): hold live
   * messages back until `resume`. Without `afterSeq` (a position being read), the client has
   * nothing yet and its position is unknown until `sendPosition`.
   */
  pauseForReplay(afterSeq?: number): void {
    this.floorSeq = afterSeq ?? 0;
    this.lastSeq = afterSeq ?? Number.NaN;
    const replay = this.replay;
    if (replay?.waiting) return;
    if (replay) {
      replay.waiting = new Fifo();
      replay.firstHeldSeq = undefined;
    } else {
      this.replay = newReplay(new Fifo());
    }
  }

  /**
   * The subscriber is owed every message after `seq` (a topic's latest value it was owed could
   * not go into a frame): the next message counts from there, and tells of what it did not get
   * (`missed`, or a gap signal), where a position not known would tell nothing.
   */
  countFrom(seq: number): void {
    this.lastSeq = seq;
  }

  /**
   * Replay history after a reconnect: first the gap (how many messages history no
   * longer had), then the retained messages, then the live ones that arrived
   * meanwhile, each sequence number once and in order. In one go: `replayBegin`,
   * `replayPage` and `replayEnd`, which a paged replay calls one page at a time.
   */
  resume(
    /** Messages history no longer held (0: none; null: unknown). */
    gap: number | null,
    history: readonly ReplayedMessage[],
    /** Where numbering restarts from, when the broker's numbering was reset. */
    floorSeq = this.floorSeq,
    /** The topic's epoch, sent with a gap signal. */
    epoch?: string,
  ): void {
    if (this.replayBegin(gap, floorSeq, epoch) !== 'more') return;
    if (this.replayPage(history, epoch) !== 'more') return;
    this.replayEnd();
  }

  /**
   * Start replaying history read in `epoch`: the gap signal, if any, and the epoch. Not
   * `more` when the numbering restarted while the history was read (what was read may be the
   * old one's; the subscriber has been told, with a gap signal of unknown size): a replay in
   * one go is then `over`, the live messages of the new numbering sent; a `paged` one is
   * `renumbered` when the new numbering has an epoch (see ReplayStep). `over` when stopped.
   */
  replayBegin(
    /** Messages history no longer held (0: none; null: unknown). */
    gap: number | null,
    /** Where numbering restarts from, when the broker's numbering was reset. */
    floorSeq = this.floorSeq,
    /** The topic's epoch, sent with a gap signal. */
    epoch?: string,
    /** History is read a page at a time (replayPage), and can be read again from its start. */
    paged = false,
  ): ReplayStep {
    if (this.stopped) return 'over';
    const replay = (this.replay ??= newReplay(undefined));
    replay.paged = paged;
    const step = this.replayStep(epoch);
    if (step !== 'more') return step;
    this.floorSeq = floorSeq;
    replay.epoch = epoch;
    // A counted gap that live messages held back fall in is told as the pages are written
    // (account, writeHeldBefore): the held ones go in their place, the rest told around them.
    const firstHeld = replay.waiting?.peek()?.seq;
    const heldInGap = gap !== null && firstHeld !== undefined && firstHeld <= floorSeq + gap;
    // Seqs passed by (`except`) among those history no longer held are not lost: the gap
    // counts the rest, and the position after it (the gap counts from the subscriber's own)
    // says where the numbering stands.
    const from = this.lastSeq;
    const counted = gap !== null && gap > 0 && !heldInGap && !Number.isNaN(from) ? gap : 0;
    const passedBy =
      counted > 0 && this.passed !== undefined
        ? this.takePassed(this.passed, from + counted + 1)
        : 0;
    if (passedBy > 0) {
      if (counted > passedBy) this.sendGap(counted - passedBy, epoch);
      this.sendPosition(from + counted, epoch);
    } else if (gap !== 0 && !heldInGap) this.sendGap(gap, epoch);
    // A subscriber that did not know the epoch (or the topic had none yet) learns it now.
    this.tellEpoch(epoch ?? replay.learnedEpoch);
    return 'more';
  }

  /**
   * Write one page of the replayed history (read in `epoch`), whatever the socket holds: a
   * page is read only once the socket was below its high-water mark, and is sized to about
   * it. Sequence numbers already had are skipped; live messages held back that come before a
   * message of the page go first (history no longer held them: trimmed while it was read).
   * Not `more` when the numbering restarted since the replay began: the page is void (told as
   * in `replayBegin`).
   */
  replayPage(
    history: readonly ReplayedMessage[],
    epoch: string | undefined = this.replay?.epoch,
  ): ReplayStep {
    const step = this.replayStep(epoch);
    if (step !== 'more') return step;
    const replay = this.replay;
    const replayEpoch = replay?.epoch;
    if (epoch !== undefined && replayEpoch !== undefined && epoch !== replayEpoch) {
      // This page is from another numbering than the replay began in. The live messages held
      // back belong to it when they showed it (those held before it showed were dropped
      // then); otherwise they are the old one's, which the gap signal covers.
      return this.restartReplay(epoch, false, replay?.learnedEpoch !== epoch);
    }
    const owner = this.ownerId;
    for (const message of history) {
      if (message.seq <= this.floorSeq) continue;
      if (replay?.waiting !== undefined) this.writeHeldBefore(replay, replay.waiting, message.seq);
      // Published except this very session (named by the id it has now, as its live copy was
      // passed by): passed by here too. One published except an earlier session of the same
      // client is replayed: that id means nothing on this connection.
      if (owner !== undefined && message.except?.includes(owner)) this.pass(message.seq);
      else this.write(message.tail, message.seq);
    }
    const last = history.at(-1)?.seq;
    if (last !== undefined) this.floorSeq = Math.max(this.floorSeq, last);
    return 'more';
  }

  /**
   * Write the live messages held back whose seq comes before `seq`, a message of the page
   * being replayed: the page skipped them, so history no longer held them, and they go in
   * their place rather than be told as a gap. Each is then had (the floor passes it).
   */
  private writeHeldBefore(replay: Replay, waiting: Fifo<Waiting>, seq: number): void {
    for (let next = waiting.peek(); next?.seq !== undefined && next.seq < seq;) {
      waiting.shift();
      this.setWaitingChars(replay, replay.waitingChars - next.tail.length);
      // Written already from this page (the floor moves at its end): neither it nor the ones
      // dropped before it (the page had them too) is owed.
      if (next.seq > this.floorSeq && !(next.seq <= this.lastSeq)) {
        this.missed += next.missedBefore;
        this.write(next.tail, next.seq, next.shared);
        this.floorSeq = next.seq;
      }
      next = waiting.peek();
    }
  }

  /**
   * The replay is over: the live messages held back meanwhile follow, each seq once, whatever
   * the socket holds (the backlog is bounded by the policy; a paged replay waits for the
   * socket to drain below its high-water mark first). `renumbered` instead when a paged
   * replay finds the numbering restarted (see ReplayStep); `over` otherwise.
   */
  replayEnd(): ReplayStep {
    const step = this.replayStep(this.replay?.epoch);
    if (step !== 'more') return step;
    this.flushWaiting();
    return 'over';
  }

  /**
   * Whether the replay (of history read in `epoch`) goes on: `over` when stopped; when the
   * numbering restarted since, the subscriber is told (restartReplay).
   */
  private replayStep(epoch: string | undefined): ReplayStep {
    if (this.stopped) return 'over';
    const restarted = this.restartSince(epoch);
    if (!restarted) return 'more';
    return this.restartReplay(restarted.epoch, restarted.rewound, false);
  }

  /** The numbering restart seen during the replay, if any (live messages came in another one). */
  private restartSince(
    epoch: string | undefined,
  ): { epoch: string | undefined; rewound: boolean } | undefined {
    const replay = this.replay;
    const restarted = replay?.restarted;
    if (restarted) {
      // History (or the position) was read in the new numbering: what was read stands, and the
      // live messages held since the restart follow on from it.
      const readInIt = !restarted.rewound && epoch !== undefined && restarted.epoch === epoch;
      if (!readInIt) return restarted;
      replay!.restarted = undefined;
    }
    const learned = replay?.learnedEpoch;
    // Live messages came in another numbering than the one history was read in. Not when they
    // came in the one the replay began in: then a later page is the newer one (replayPage).
    if (
      learned !== undefined &&
      epoch !== undefined &&
      learned !== epoch &&
      learned !== replay?.epoch
    ) {
      return { epoch: learned, rewound: false };
    }
    return undefined;
  }

  /**
   * The replay's numbering restarted (to `epoch`; `rewound`: in the same epoch, its seq gone
   * back): the subscriber is told, with a gap signal of unknown size. `dropHeld`: the live
   * messages held back are the old numbering's, never to be sent. A paged replay of a new
   * epoch then reads that numbering from its start (`renumbered`), its live messages still
   * held behind it. Any other (one in one go, a numbering without an epoch to read it by or
   * gone back in the same one, one renumbered MAX_RENUMBERS times already) ends here: the
   * live messages held back follow (`over`).
   */
  private restartReplay(
    epoch: string | undefined,
    rewound: boolean,
    dropHeld: boolean,
  ): ReplayStep {
    this.floorSeq = 0;
    const replay = this.replay;
    if (dropHeld) {
      // Seqs passed by (`except`) came with those held: the old numbering's too. Counted
      // against the new one, they would hide as many of its losses.
      this.passed = undefined;
      if (replay?.waiting !== undefined) {
        replay.waiting = new Fifo();
        this.setWaitingChars(replay, 0);
        replay.firstHeldSeq = undefined;
      }
    }
    this.sendGap(null, epoch);
    if (
      replay !== undefined &&
      replay.paged &&
      replay.waiting !== undefined &&
      epoch !== undefined &&
      !rewound &&
      replay.renumbers < MAX_RENUMBERS
    ) {
      replay.renumbers++;
      replay.epoch = epoch;
      replay.restarted = undefined;
      // Live messages of this numbering are no news now (the subscriber was told it).
      replay.learnedEpoch = epoch;
      return 'renumbered';
    }
    this.flushWaiting();
    return 'over';
  }

  /** Send the live messages held back during a replay, and deliver live ones directly again. */
  private flushWaiting(): void {
    const waiting = this.endReplay()?.waiting ?? [];
    // The floor stays: a live copy of the last replayed message may still be on its way
    // (history and live delivery can travel on different broker connections).
    // The backlog was bounded by the policy as it filled: it is written whole, as a page is.
    for (const message of waiting) {
      if (this.stopped) return;
      const seq = message.seq;
      // The history had it (the floor), or it was written already: nor is what was dropped
      // before it owed (the history had that too).
      if (seq !== undefined && (seq <= this.floorSeq || seq <= this.lastSeq)) continue;
      // Messages dropped from the backlog before one the history already had were had too.
      // (Of those before a later one, any the history had are discounted when it is written.)
      this.missed += message.missedBefore;
      this.write(message.tail, seq, message.shared);
    }
  }

  /**
   * Set the characters of frame text `replay` holds back, telling `heldChanged` the change: only
   * while it is the replay under way (one ended was released whole, by `endReplay`).
   */
  private setWaitingChars(replay: Replay, chars: number): void {
    const change = chars - replay.waitingChars;
    replay.waitingChars = chars;
    if (change !== 0 && replay === this.replay) this.heldChanged(change);
  }

  /** The replay is over (or the subscription stopped): what it holds back is released. Returns it. */
  private endReplay(): Replay | undefined {
    const replay = this.replay;
    if (replay === undefined) return undefined;
    this.setWaitingChars(replay, 0);
    this.replay = undefined;
    return replay;
  }

  /**
   * The characters of frame text held back for replays changed by `chars` (fewer when
   * negative). Told where a backlog grows and shrinks, never on the live path: a subclass counts
   * them for its connection (TopicSubscription).
   */
  protected heldChanged(_chars: number): void {}

  /** The seq of the oldest live message held back now (during a replay), if any. */
  get oldestWaitingSeq(): number | undefined {
    return this.replay?.waiting?.peek()?.seq;
  }

  /** The topic's high-water mark for this subscriber's socket. */
  get highWaterMark(): number {
    return this.flow.highWaterMark;
  }

  /** Whether the socket holds less than the high-water mark now. */
  get belowHighWaterMark(): boolean {
    return this.sink.bufferedAmount < this.flow.highWaterMark;
  }

  /** Call `listener` once the socket's write buffer has emptied; returns a function that cancels. */
  onSinkDrain(listener: () => void): () => void {
    return this.sink.onDrain(listener);
  }

  /** True once the subscription has stopped (unsubscribed, closed, finished). */
  get isStopped(): boolean {
    return this.stopped;
  }

  /** Call `listener` when the subscription stops (at once if it has); returns a function that cancels. */
  onStop(listener: () => void): () => void {
    if (this.stopped) {
      listener();
      return () => undefined;
    }
    const listeners = (this.stopListeners ??= new Set());
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      // Nothing left to tell: the set (and the rare state, if that was all) goes.
      if (listeners.size === 0 && this.stopListeners === listeners) this.stopListeners = undefined;
    };
  }

  /**
   * Tell the subscriber where it starts, `{"seq": N, "epoch": E}`: N is the last message it
   * will not get, so its next one is N + 1.
   */
  sendPosition(seq: number, epoch: string | undefined): void {
    if (this.stopped) return;
    this.sendRaw(positionTail(seq, epoch));
    this.toldEpoch(epoch);
    this.lastSeq = seq;
  }

  /**
   * The topic's live messages carry another epoch than before (or one for the first time);
   * `restarted`: the topic's numbering restarted. A subscriber whose positions belong to
   * another numbering is told, with a gap signal of unknown size carrying the new epoch,
   * before the new numbering's first message; one that had no epoch is told which it is.
   * `rewound`: the restart kept the epoch (a broker restored from an older snapshot), so the
   * epoch cannot tell who has seen it. A restart to a new epoch is no news to a subscriber
   * already in it: one whose position was read, or that was told a gap, after the restart and
   * before this node was handed the new numbering's first message.
   */
  epochSeen(epoch: string | undefined, restarted: boolean, rewound = false): void {
    if (this.stopped) return;
    if (restarted && !rewound && epoch !== undefined && epoch === this.clientEpoch) {
      restarted = false;
    }
    const replay = this.replay;
    if (replay?.waiting && !restarted) {
      // Mid-replay, the replay compares the client's epoch with the broker's itself. Live
      // messages of another numbering than the client's are held whatever their seq: the
      // floor (the client's `since`) is of its own.
      if (epoch !== undefined && this.clientEpoch !== undefined && epoch !== this.clientEpoch) {
        this.floorSeq = 0;
      }
      replay.learnedEpoch = epoch ?? replay.learnedEpoch;
      return;
    }
    const other =
      epoch !== undefined && this.clientEpoch !== undefined && epoch !== this.clientEpoch;
    if (restarted || other) this.numberingRestarted(epoch, rewound);
    else this.tellEpoch(epoch);
  }

  /** A position or gap signal told the subscriber this epoch. */
  toldEpoch(epoch: string | undefined): void {
    if (epoch !== undefined) this.clientEpoch = epoch;
  }

  private tellEpoch(epoch: string | undefined): void {
    if (epoch === undefined || epoch === this.clientEpoch) return;
    this.clientEpoch = epoch;
    if (this.resumable) this.sendRaw(epochTail(epoch));
  }

  /**
   * Send a gap signal and account for it as the subscriber does: `gap` more messages are
   * lost; an unknown gap with an epoch starts that numbering from its beginning (before seq
   * 1), one without leaves the position unknown until the next message. Skips not yet
   * reported are part of an unknown gap.
   */
  private sendGap(gap: number | null, epoch: string | undefined): void {
    this.sendRaw(gapTail(gap, epoch));
    this.toldEpoch(epoch);
    if (gap !== null) {
      this.lastSeq += gap;
      return;
    }
    this.lastSeq = epoch === undefined ? Number.NaN : 0;
    this.missed = 0;
  }

  /**
   * The broker numbers the topic anew (it lost its data): earlier sequence numbers mean
   * nothing now. A subscriber that tracks positions is told with a gap signal of unknown
   * size carrying the new epoch, before the new numbering's first message.
   */
  private numberingRestarted(epoch: string | undefined, rewound: boolean): void {
    this.floorSeq = 0;
    // Seqs passed by (`except`) are the old numbering's: counted against the new one, they
    // would hide as many of its losses.
    this.passed = undefined;
    if (this.held !== undefined) {
      // The old numbering's: never to be sent now.
      this.dropHeld();
      this.skip();
    }
    const replay = this.replay;
    if (replay?.waiting) {
      // Mid-replay: the live messages held so far belong to the old numbering (the gap
      // signal sent at resume covers them).
      replay.waiting = new Fifo();
      this.setWaitingChars(replay, 0);
      replay.firstHeldSeq = undefined;
      replay.restarted = { epoch, rewound };
      // Live messages come in the new numbering now.
      replay.learnedEpoch = epoch ?? replay.learnedEpoch;
      return;
    }
    if (this.resumable) {
      this.sendGap(null, epoch);
      return;
    }
    // Not told: its next message starts afresh (the skips pending are still reported).
    this.toldEpoch(epoch);
    this.lastSeq = Number.NaN;
  }

  /** Sequence number of the first live message held back during a replay, if any. */
  get firstWaitingSeq(): number | undefined {
    const replay = this.replay;
    return replay?.waiting === undefined ? undefined : replay.firstHeldSeq;
  }

  /** Send a frame for this subscription made of the head, its id and `tail`, regardless of policy. */
  sendRaw(tail: string): void {
    if (!this.stopped) this.sink.send(this.route.head + this.quotedId + tail, this);
  }

  /**
   * Forget what was seen: live messages of any number are kept from now on (a resume whose
   * position belongs to a numbering the broker no longer has).
   */
  resetFloor(): void {
    this.floorSeq = 0;
  }

  /** Send a last frame regardless of pressure (a stream's completion): it is one small frame. */
  finish(tail: string): void {
    if (this.stopped) return;
    const held = this.held;
    this.dropHeld();
    if (held !== undefined) this.write(held.tail, held.seq);
    this.write(tail, undefined);
    this.stop();
  }

  stop(): void {
    const wasStopped = this.stopped;
    this.flags |= STOPPED;
    this.dropHeld();
    this.endReplay();
    const listeners = this.stopListeners;
    this.stopListeners = undefined;
    if (wasStopped || !listeners) return;
    for (const listener of listeners) listener();
  }

  private disconnect(): void {
    this.stop();
    this.route.onSlowConsumer('disconnected');
    this.sink.close(SLOW_CONSUMER_CLOSE_CODE, 'slow consumer');
  }

  /** The socket drained: the held message goes. */
  private flushHeld(): void {
    const held = this.held;
    this.held = undefined;
    if (held === undefined || this.stopped) return;
    this.write(held.tail, held.seq);
  }

  /** Forget the held message, if any, and stop waiting for the socket to drain (for it or a skip). */
  private dropHeld(): void {
    const held = this.held;
    if (held !== undefined) {
      this.held = undefined;
      held.cancelDrain();
    }
    const watch = this.dropWatch;
    if (watch !== undefined) {
      this.dropWatch = undefined;
      watch.cancelDrain();
    }
  }

  /** A message skipped ('drop'): have the socket's drain tell it, should no message follow. */
  private watchDrain(seq: number | undefined): void {
    const watch = this.dropWatch;
    if (watch !== undefined) {
      if (seq !== undefined) watch.seq = seq;
      return;
    }
    this.dropWatch = { seq, cancelDrain: this.sink.onDrain(() => this.tellDropped()) };
  }

  /**
   * The socket drained and the messages skipped since the last one written are still untold
   * (no message followed to carry them as `missed`): a subscriber that tracks positions is told
   * them now by a gap signal of their count, with the messages this node never had among them,
   * and the numbering moves past the last one skipped (told as a position, should seqs passed by
   * lie among them). Not during a replay: its first message carries them.
   */
  private tellDropped(): void {
    const watch = this.dropWatch;
    this.dropWatch = undefined;
    const last = watch?.seq;
    // A count needs a known position to count from (after a gap of unknown size there is none):
    // then, as for unnumbered messages, the next message carries it.
    if (
      last === undefined ||
      this.stopped ||
      this.missed === 0 ||
      this.replay !== undefined ||
      Number.isNaN(this.lastSeq) ||
      last <= this.lastSeq
    )
      return;
    const between = last - this.lastSeq;
    const passedBy = this.passed === undefined ? 0 : this.takePassed(this.passed, last);
    const lost = Math.max(Math.min(this.missed, between), between - passedBy);
    this.lastSeq = last;
    this.missed = 0;
    this.sendRaw(gapTail(lost, this.clientEpoch));
    if (passedBy > 0) this.sendRaw(positionTail(last, this.clientEpoch));
  }

  private skip(): void {
    this.missed++;
    this.route.onSlowConsumer('dropped');
  }

  /** Write one message (with `missed`, and after a gap signal when it follows a hole). */
  private write(tail: string, seq: number | undefined, shared?: SharedFrame): void {
    if (seq !== undefined && !this.account(seq)) return;
    if (shared !== undefined && this.missed === 0 && shared.quotedId === this.quotedId) {
      this.sink.send(shared, this);
      return;
    }
    this.sink.send(this.route.head + this.quotedId + missedPart(this.missed) + tail, this);
    this.missed = 0;
  }

  /**
   * Before message `seq` is written: the numbers between the last accounted one and `seq`
   * are the `missed` pending and, if more, a hole (messages this node never received). A
   * subscriber that tracks positions is told of the hole with a gap signal; another one gets
   * it in `missed`. False when `seq` is accounted for already (a duplicate: not written).
   */
  private account(seq: number): boolean {
    const between = seq - 1 - this.lastSeq; // NaN while the position is unknown
    if (between < 0) return false;
    const passedBy = this.passed === undefined ? 0 : this.takePassed(this.passed, seq);
    // Skips the subscriber already has (a backlog dropped where the replayed history overlapped):
    // what was skipped lies among the seqs between, and none of them is one passed by.
    const skippable = between - passedBy;
    if (this.missed > skippable) this.missed = skippable;
    const hole = skippable - this.missed;
    if (passedBy > 0 && this.resumable) {
      // Seqs passed by (`except`) among those before: a position-tracking subscriber is told
      // where its numbering now stands, so this message follows on from it. The skipped ones
      // (`missed`) and a hole may lie anywhere among them (their order is not kept): they are told
      // first, as one gap signal, so that no position names a skipped seq as passed by (a resume
      // from that position would then never tell of it).
      const untold = Math.max(0, hole) + this.missed;
      if (untold > 0) this.sendGap(untold, this.clientEpoch);
      this.missed = 0;
      this.sendRaw(positionTail(seq - 1, this.clientEpoch));
    } else if (hole > 0) {
      if (this.resumable) this.sendGap(hole, this.clientEpoch);
      else this.missed += hole;
    }
    this.lastSeq = seq;
    return true;
  }

  /** How many seqs passed by lie between the last accounted one and `seq`; forgets those up to `seq`. */
  private takePassed(passed: PassedSeqs, seq: number): number {
    const count = passed.take(seq, this.lastSeq);
    if (passed.length === 0) this.passed = undefined;
    return count;
  }
}
