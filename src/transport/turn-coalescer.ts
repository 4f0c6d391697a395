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
 */
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

/** Set while the flush microtask is queued: one per turn, however often `due` empties (flushSince). */
let flushQueued = false;

function flushAll(): void {
  flushQueued = false;
  const writers = due;
  due = [];
  for (const writer of writers) writer.flushWrites();
}

/** Call `writer.flushWrites()` once the current task and the microtasks queued before this are done. */
export function flushAfterTask(writer: CorkedWriter): void {
  due.push(writer);
  if (flushQueued) return;
  flushQueued = true;
  void settled.then(flushAll);
}

/** How many writers are registered: a mark for `flushSince`. */
export function dueCount(): number {
  return due.length;
}

/**
 * Flush now the writers registered since `mark` (dueCount), not waiting for the task to end: a
 * fan-out writes each subscriber's frames before it serves the next subscriber, so the first
 * socket's bytes leave while the rest are served. Those writers run `flushWrites` again with
 * the others at the task's end only if they were written to again since.
 */
export function flushSince(mark: number): void {
  const count = due.length - mark;
  if (count <= 0) return;
  if (count === 1) {
    // The common case (a fan-out's one subscriber): no array made.
    due.pop()!.flushWrites();
    return;
  }
  for (const writer of due.splice(mark)) writer.flushWrites();
}

/**
 * Fan-outs put off to the end of the turn (TopicRegistry gathers a turn's messages so that each
 * subscriber takes them at once). A socket's frames must still leave in the order they were
 * sent: every transport runs the pending fan-outs before it writes anything else or closes
 * (`beforeWrite`), so a message published before a reply or a close goes before it.
 */
let fanOuts: (() => void)[] = [];

function runFanOuts(): void {
  const runs = fanOuts;
  fanOuts = [];
  for (const run of runs) run();
}

/** Run `fanOut` once the current task is done, or before the next write of any transport. */
export function deferFanOut(fanOut: () => void): void {
  if (fanOuts.push(fanOut) === 1) void settled.then(runFanOuts);
}

/** Before a transport writes or closes: run the fan-outs put off until now (see deferFanOut). */
export function beforeWrite(): void {
  if (fanOuts.length !== 0) runFanOuts();
}
