import { gapTail, missedPart } from './frames.js';
import type { SharedFrame } from './frames.js';
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

/** Live messages held for one subscription while its history is replayed. */
const MAX_WAITING = 10_000;

/**
 * One subscription's outbound path. The socket's buffered bytes are checked
 * before every frame, so a stalled subscriber costs at most one high-water
 * mark of memory (plus one held message) and never delays anyone else.
 */
export class Delivery {
  /** Messages skipped since the last one sent; reported on the next. */
  missed = 0;
  /** Total messages skipped over the subscription's life. */
  droppedTotal = 0;
  private held: string | undefined;
  private cancelDrain: (() => void) | undefined;
  private stopped = false;
  /** Sequence numbers up to this one were already sent (resume): later duplicates are dropped. */
  private floorSeq = 0;
  /** Live messages that arrive while history is being replayed, sent after it. */
  private waiting:
    { tail: string; shared: SharedFrame | undefined; seq: number | undefined }[] | undefined;

  constructor(
    private readonly sink: Sink,
    private readonly head: string,
    private readonly quotedId: string,
    private readonly flow: FlowControl,
    /** Told of each message skipped, and of a disconnect, for metrics. */
    private readonly onSlowConsumer: (event: 'dropped' | 'disconnected') => void = () => undefined,
  ) {}

  /**
   * Offer one message (its shared tail, and the whole frame when this
   * subscription uses the topic's shared id); sent now, held, skipped or fatal, by policy.
   */
  offer(tail: string, shared?: SharedFrame, seq?: number): void {
    if (this.stopped) return;
    if (seq !== undefined && seq <= this.floorSeq) return;
    if (this.waiting) {
      if (this.waiting.length >= MAX_WAITING) {
        this.waiting.shift(); // bounded: the oldest waiting message is lost, and counted
        this.skip();
      }
      this.waiting.push({ tail, shared, seq });
      return;
    }
    if (this.sink.bufferedAmount < this.flow.highWaterMark) {
      if (this.held !== undefined) {
        // Something newer is here: the held message is superseded.
        this.held = undefined;
        this.skip();
      }
      if (shared !== undefined && this.missed === 0 && shared.quotedId === this.quotedId) {
        this.sink.send(shared);
        return;
      }
      this.write(tail);
      return;
    }
    switch (this.flow.slowConsumer) {
      case 'drop':
        this.skip();
        return;
      case 'keep-latest':
        if (this.held !== undefined) this.skip();
        this.held = tail;
        this.cancelDrain ??= this.sink.onDrain(() => this.flushHeld());
        return;
      case 'disconnect':
        this.stop();
        this.onSlowConsumer('disconnected');
        this.sink.close(SLOW_CONSUMER_CLOSE_CODE, 'slow consumer');
        return;
    }
  }

  /** The client already has everything up to `afterSeq`: hold live messages back until `resume`. */
  pauseForReplay(afterSeq: number): void {
    this.floorSeq = afterSeq;
    this.waiting ??= [];
  }

  /**
   * Replay history after a reconnect: first the gap (how many messages history no
   * longer had), then the retained messages, then the live ones that arrived
   * meanwhile, each sequence number once and in order.
   */
  resume(
    /** Messages history no longer held (0: none; null: unknown). */
    gap: number | null,
    history: readonly { tail: string; seq: number }[],
    /** Where numbering restarts from, when the broker's numbering was reset. */
    floorSeq = this.floorSeq,
  ): void {
    if (this.stopped) return;
    const waiting = this.waiting ?? [];
    this.waiting = undefined;
    this.floorSeq = floorSeq;
    if (gap !== 0) this.sendRaw(gapTail(gap));
    for (const message of history) this.offer(message.tail, undefined, message.seq);
    const last = history.at(-1)?.seq;
    if (last !== undefined) this.floorSeq = Math.max(this.floorSeq, last);
    // The floor stays: a live copy of the last replayed message may still be on its way
    // (history and live delivery can travel on different broker connections).
    for (const message of waiting) this.offer(message.tail, message.shared, message.seq);
  }

  /** Sequence number of the first live message held back during a replay, if any. */
  get firstWaitingSeq(): number | undefined {
    return this.waiting?.[0]?.seq;
  }

  /** Send a frame for this subscription made of the head, its id and `tail`, regardless of policy. */
  sendRaw(tail: string): void {
    if (!this.stopped) this.sink.send(this.head + this.quotedId + tail);
  }

  /** The broker numbers the topic from 1 again (it lost its state): forget what was seen. */
  resetFloor(): void {
    this.floorSeq = 0;
  }

  /** Send a last frame regardless of pressure (a stream's completion): it is one small frame. */
  finish(tail: string): void {
    if (this.stopped) return;
    if (this.held !== undefined) this.write(this.held);
    this.held = undefined;
    this.write(tail);
    this.stop();
  }

  stop(): void {
    this.stopped = true;
    this.held = undefined;
    this.cancelDrain?.();
    this.cancelDrain = undefined;
  }

  private flushHeld(): void {
    this.cancelDrain = undefined;
    const held = this.held;
    if (held === undefined || this.stopped) return;
    this.held = undefined;
    this.write(held);
  }

  private skip(): void {
    this.missed++;
    this.droppedTotal++;
    this.onSlowConsumer('dropped');
  }

  private write(tail: string): void {
    this.sink.send(this.head + this.quotedId + missedPart(this.missed) + tail);
    this.missed = 0;
  }
}
