// Input handed to sessions in bounded turns, every connection of the process together (WebSocket
// and TCP): at most DIRECT_MESSAGES_PER_TURN messages a turn straight from what was read, and
// held ones (read while reading was paused, or past that allowance) at most
// HELD_MESSAGES_PER_TURN a turn, in the order their connections asked, each kind of turn
// stopping once what its messages answered reaches OUTPUT_CHARS_PER_TURN; and what sessions send
// past a turn's OUTPUT_CHARS_PER_TURN written (and made: MadeLater replies, a batch's pieces) in
// output turns, each connection's in order, so that no connections' reads, nor what they ask
// for, hold the event loop for the others.

import { CloseCode } from './transport.js';
import type { EncodedFrame, PieceSource } from './transport.js';

/**
 * The most held messages (read while reading was paused, before the session listened, or past
 * DIRECT_MESSAGES_PER_TURN) handed
 * to sessions in one event-loop turn, all connections together; the rest go on in the next
 * turns (setImmediate), so that the sockets' I/O is served in between, as the heartbeat and the
 * fan-out do. Held messages are paid for already, so nothing else bounds them: the connections
 * of one address, paused for its shared budget, all read on at the moment it has refilled, each
 * holding the rest of a 64 KiB read (a thousand small requests), and handed over in the turn
 * that resumes them they held the loop for seconds.
 */
export const HELD_MESSAGES_PER_TURN = 256;
/**
 * Of a turn's held messages, the most one connection is handed before the next connection
 * waiting is: connections resumed together share the turns, in the order they asked.
 */
export const HELD_MESSAGES_PER_VISIT = 32;

/**
 * The most messages handed to sessions as they are read (not held first) in one event-loop
 * turn, all WebSocket and TCP connections together; past it, a connection's message is held
 * and goes in the held turns (queueHeld), and so is every later one of it, in order. In one
 * poll phase ws parses a 64 KiB read from every readable socket and hands over every message
 * in it: a hundred connections pipelining small requests handed a hundred thousand messages
 * to their sessions in one turn, and the loop stalled for seconds. Above what ordinary load
 * reaches (32 connections with 16 calls in flight each hand over 512 a turn at most).
 */
export const DIRECT_MESSAGES_PER_TURN = 1024;
/**
 * The count of direct deliveries is reset (setImmediate) only once it reaches this: a turn that
 * hands over fewer schedules nothing, and what it counted stays for the turns after (the
 * allowance is met no sooner than DIRECT_MESSAGES_PER_TURN - DIRECT_COUNT_RESET_MARK in a turn).
 */
const DIRECT_COUNT_RESET_MARK = 64;
/** Messages handed over as they were read since the count was last reset. */
let directCount = 0;
let directResetDue = false;

/**
 * The most characters of text frames (a reply, a notification: what one session sends, not a
 * publish's frame shared by its subscribers) sent in one event-loop turn as messages read are
 * handed over, all connections together, and again in one held turn; past it the messages read
 * wait for a later turn, in order. A plain handler's reply is made and written in the turn its
 * message is handed over (an async handler's is sent as its promise settles, after the read's
 * messages were all handed over, and is not bounded here): seventy pipelined calls to a method
 * answering a MiB each held the loop for 0.9 s in one turn, every other connection waiting (31
 * to 42 ms at most with this bound: bench/turn-stall.mjs). The held turns count their own, so
 * reads that spend a turn's allowance do not keep held messages waiting.
 */
export const OUTPUT_CHARS_PER_TURN = 1024 * 1024;
/** Characters sent outside held and output turns since the count was last reset. */
let directOutput = 0;
/** Characters sent in the held turn under way. */
let heldOutput = 0;
let inHeldTurn = false;
/** Characters sent in the output turn under way. */
let turnOutput = 0;
let inOutputTurn = false;

/**
 * @internal A message read may go to its session now: true, and counted, within this turn's
 * DIRECT_MESSAGES_PER_TURN and OUTPUT_CHARS_PER_TURN; false past either (the message is to be
 * held, in order).
 */
export function directDeliveryAllowed(): boolean {
  if (directOutput >= OUTPUT_CHARS_PER_TURN) return false;
  return ++directCount < DIRECT_COUNT_RESET_MARK || directDeliveryCounted();
}

/** @internal A session sent a text frame of `chars` characters: counted toward this turn's output. */
export function countOutput(chars: number): void {
  if (inHeldTurn) heldOutput += chars;
  else if (inOutputTurn) turnOutput += chars;
  else if ((directOutput += chars) >= OUTPUT_CHARS_PER_TURN) resetDirectCountsLater();
}

/**
 * @internal What sessions sent in this turn (the held turn's, the output turn's, or the rest's)
 * has reached OUTPUT_CHARS_PER_TURN: a text frame sent now waits for an output turn
 * (queueOutput), and so does everything its connection sends after it, in order.
 */
export function outputSpent(): boolean {
  if (inHeldTurn) return heldOutput >= OUTPUT_CHARS_PER_TURN;
  if (inOutputTurn) return turnOutput >= OUTPUT_CHARS_PER_TURN;
  return directOutput >= OUTPUT_CHARS_PER_TURN;
}

/** @internal The held turn under way has sent its OUTPUT_CHARS_PER_TURN: it hands over no more. */
export function heldOutputSpent(): boolean {
  return heldOutput >= OUTPUT_CHARS_PER_TURN;
}

/** Past the mark: have the count reset at the end of this turn; true within the allowance. */
function directDeliveryCounted(): boolean {
  resetDirectCountsLater();
  return directCount <= DIRECT_MESSAGES_PER_TURN;
}

/** Have the direct counts (messages, output) reset at the end of this turn, once. */
function resetDirectCountsLater(): void {
  if (directResetDue) return;
  directResetDue = true;
  setImmediate(resetDirectCount);
}

function resetDirectCount(): void {
  directResetDue = false;
  directCount = 0;
  directOutput = 0;
}

/** A connection whose held messages are handed over in turns (handHeldTurn). */
export interface HeldTurnTaker {
  /** Hand the session up to `most` held messages; returns how many it handed over. */
  handHeld(most: number): number;
}

/** The connections whose held messages wait for a turn, in order (each at most once). */
let heldQueue: HeldTurnTaker[] = [];
let heldTurnDue = false;

/** @internal Give `transport` a share of the next turn's held messages. */
export function queueHeld(transport: HeldTurnTaker): void {
  heldQueue.push(transport);
  if (heldTurnDue) return;
  heldTurnDue = true;
  setImmediate(handHeldTurn);
}

/**
 * One turn of held messages: up to HELD_MESSAGES_PER_TURN, HELD_MESSAGES_PER_VISIT a connection,
 * in the order they were queued, until the turn has sent OUTPUT_CHARS_PER_TURN (its first
 * message goes whatever it sends); a connection with more queues itself again, behind those this
 * turn did not reach.
 */
function handHeldTurn(): void {
  heldTurnDue = false;
  const queue = heldQueue;
  heldQueue = [];
  let left = HELD_MESSAGES_PER_TURN;
  let at = 0;
  inHeldTurn = true;
  heldOutput = 0;
  try {
    while (at < queue.length && left > 0 && !heldOutputSpent()) {
      const share = left < HELD_MESSAGES_PER_VISIT ? left : HELD_MESSAGES_PER_VISIT;
      left -= queue[at++]!.handHeld(share);
    }
  } finally {
    inHeldTurn = false;
    // Also when a session threw: the connections not reached keep their place.
    if (at < queue.length) {
      const requeued = heldQueue;
      heldQueue = queue.slice(at);
      for (const transport of requeued) heldQueue.push(transport);
    }
    if (heldQueue.length > 0 && !heldTurnDue) {
      heldTurnDue = true;
      setImmediate(handHeldTurn);
    }
  }
}

/**
 * @internal Whether a close with `code` drops what waits for an output turn rather than send it first: a
 * shed (the node's output over its budget) and a failure, which close to free what they hold.
 */
export function dropsWaitingOutput(code: number): boolean {
  return code === CloseCode.TryAgainLater || code === CloseCode.InternalError;
}

/** @internal A message sent in pieces (Transport.sendPieces): whether its first part is written. */
export interface Pieces {
  source: PieceSource;
  written: (() => void) | undefined;
  started: boolean;
}

/** The pieces of a message one turn made (takePieces). */
export interface TakenPieces {
  /** Their text, joined. */
  readonly text: string;
  /** Each piece, as the source gave it. */
  readonly parts: readonly string[];
  /** Whether the message is complete (the source has given its last piece). */
  readonly done: boolean;
}

/**
 * @internal The pieces of a message this turn's output allows, made now and counted toward it;
 * undefined when the turn allows none.
 */
export function takePieces(pieces: Pieces): TakenPieces | undefined {
  const parts: string[] = [];
  const source = pieces.source;
  while (!outputSpent()) {
    const before = source.made;
    const piece = source.next();
    if (piece === undefined) return taken(parts, true);
    countOutput(source.made - before);
    parts.push(piece);
  }
  return parts.length === 0 ? undefined : taken(parts, false);
}

function taken(parts: string[], done: boolean): TakenPieces {
  return {
    parts,
    done,
    get text() {
      return parts.join('');
    },
  };
}

/**
 * @internal A frame waiting for an output turn; a function writes what it stands for and returns
 * whether it is done (false: it goes on first in the next output turn).
 */
export type WaitingFrame = string | EncodedFrame | (() => boolean);

/** @internal What a waiting frame counts in its connection's queued output: its characters (bytes, for a shared frame). */
export function waitingSize(frame: WaitingFrame): number {
  if (typeof frame === 'string') return frame.length;
  return typeof frame === 'function' ? 0 : frame.bytes.length;
}

/**
 * @internal Frames a connection sent once the turn's output was spent, and every frame it sent
 * after them, in order, waiting for output turns: the next to write (`from`), and the characters
 * (bytes, for a shared frame) of those left. A function stands for a frame made as it is
 * written (sendMade, sendPieces) or an onWritten wait.
 */
export interface WaitingOutput {
  frames: WaitingFrame[];
  from: number;
  chars: number;
}

/**
 * @internal `frame` kept for output turns behind what waits in `waiting`, which is made (and
 * `writer` queued for the next output turn) when nothing waited; returns what waits now.
 */
export function keepWaiting(
  waiting: WaitingOutput | undefined,
  frame: WaitingFrame,
  writer: WaitingOutputWriter,
): WaitingOutput {
  if (waiting === undefined) {
    waiting = { frames: [], from: 0, chars: 0 };
    queueOutput(writer);
  }
  waiting.frames.push(frame);
  waiting.chars += waitingSize(frame);
  return waiting;
}

/**
 * @internal Write `waiting`'s frames in order while the turn's output allows and `open()` holds
 * (a transport's part of an output turn): a function is called in its frame's place (false: it
 * goes on first in the next output turn), any other frame goes to `write`. Returns whether the
 * loop ended for want of frames or of `open` (false: what is left waits for the next turn).
 */
export function writeWaitingFrames(
  waiting: WaitingOutput,
  open: () => boolean,
  write: (frame: string | EncodedFrame) => void,
): boolean {
  const frames = waiting.frames;
  while (waiting.from < frames.length && open()) {
    if (outputSpent()) return false;
    const frame = frames[waiting.from]!;
    if (typeof frame === 'function' && !frame()) return false;
    frames[waiting.from++] = '';
    waiting.chars -= waitingSize(frame);
    if (typeof frame !== 'function') write(frame);
  }
  return true;
}

/** A connection whose sent frames wait for an output turn (queueOutput, writeOutputTurn). */
export interface WaitingOutputWriter {
  /**
   * Write waiting frames, in order, while the turn's output allows (outputSpent); returns whether
   * none is left.
   */
  writeWaiting(): boolean;
}

/** The connections whose frames wait to be written, in order (each at most once). */
let outputQueue: WaitingOutputWriter[] = [];
let outputTurnDue = false;

/** @internal Have `writer`'s waiting frames written in the next output turns. */
export function queueOutput(writer: WaitingOutputWriter): void {
  outputQueue.push(writer);
  if (outputTurnDue) return;
  outputTurnDue = true;
  setImmediate(writeOutputTurn);
}

/**
 * One turn of waiting output: the connections in the order they were queued, each writing what
 * waits until the turn has sent OUTPUT_CHARS_PER_TURN (its first frame goes whatever its
 * size); the one it stopped in goes behind those not reached, so that connections with much
 * waiting share the turns.
 */
function writeOutputTurn(): void {
  outputTurnDue = false;
  const queue = outputQueue;
  outputQueue = [];
  let at = 0;
  let stopped: WaitingOutputWriter | undefined;
  inOutputTurn = true;
  turnOutput = 0;
  try {
    while (at < queue.length && turnOutput < OUTPUT_CHARS_PER_TURN) {
      const writer = queue[at++]!;
      if (!writer.writeWaiting()) {
        stopped = writer;
        break;
      }
    }
  } finally {
    inOutputTurn = false;
    const requeued = outputQueue;
    outputQueue = queue.slice(at);
    if (stopped) outputQueue.push(stopped);
    for (const writer of requeued) outputQueue.push(writer);
    if (outputQueue.length > 0 && !outputTurnDue) {
      outputTurnDue = true;
      setImmediate(writeOutputTurn);
    }
  }
}
