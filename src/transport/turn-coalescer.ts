/**
 * Write coalescing without a wait. A transport corks its socket on the first write after a
 * flush and registers here; one microtask, queued by the first registration, flushes every
 * socket registered before it runs. A microtask runs as soon as the task under way (the I/O
 * callback that read a chunk, a timer) has finished its synchronous work and the microtasks
 * queued before it. So the replies to 64 requests parsed from one TCP chunk, whose handlers all
 * run in that callback, leave in one writev, as do the frames of a publish fanned out in one
 * loop, while a lone reply waits for nothing but the end of its own callback: not, as an
 * uncork in a setImmediate would make it, for every other I/O callback of the poll phase.
 * A write made after the flush starts the next gather; order per socket is unchanged.
 *
 * A task that writes many frames to one socket (the replies to 64 pipelined calls) does not
 * gather them all: every MAX_GATHERED_FRAMES frames go at once, so the peer reads and answers
 * the first while this side is still making the rest. Gathering all 64 would make the two ends
 * take turns, each idle while the other works: measured, a closed loop of 64 calls runs at half
 * the rate that way, each call waiting about twice as long, for the same CPU per call
 * (docs/performance.md).
 */

/**
 * Frames gathered under one cork before they are written while the task goes on: few enough
 * that the peer starts early, enough that the write's system call is shared (16: the most
 * calls per second on one connection with 64 in flight, against 8 and 32, bench rr-1x64).
 */
export const MAX_GATHERED_FRAMES = 16;

/** A transport corked since its last flush. */
export interface CorkedWriter {
  /** Write what was gathered and uncork. */
  flushWrites(): void;
}

let due: CorkedWriter[] = [];

/**
 * The microtask is a reaction to this settled promise rather than queueMicrotask's, which makes
 * an AsyncResource and a bound function for every call: at one reply per task that is one
 * queueing per reply.
 */
const settled = Promise.resolve();

function flushAll(): void {
  const writers = due;
  due = [];
  for (const writer of writers) writer.flushWrites();
}

/** Call `writer.flushWrites()` once the current task and the microtasks queued before this are done. */
export function flushAfterTask(writer: CorkedWriter): void {
  if (due.push(writer) === 1) void settled.then(flushAll);
}
