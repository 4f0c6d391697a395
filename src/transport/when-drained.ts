import type { Writable } from 'node:stream';

const EMPTY = Buffer.alloc(0);

/**
 * Where some of the bytes `buffered()` counts wait before they reach the stream (ws's sender,
 * while it compresses). Called with `wake` when the stream itself holds nothing: returns what
 * cancels the wait once it has arranged for `wake` to run when some of those bytes have moved
 * on, or undefined when none wait there.
 */
export type Upstream = (wake: () => void) => (() => void) | undefined;

/**
 * Call `listener` once `buffered()` (the transport's queued bytes) is at most `threshold`;
 * returns a function that cancels the wait.
 *
 * A Node stream emits 'drain' only after a `write()` returned false (at least
 * `writableHighWaterMark`, 16 KiB for a socket, queued), so waiting for 'drain' alone would
 * never end for a smaller backlog. The first check runs after the corked writes have been
 * flushed (setImmediate: the turn coalescer flushes in a microtask); then, while bytes remain,
 * it waits for 'drain' when the stream owes one (or for its 'close': a stream destroyed never
 * drains, and a session that outlives it, as an event-stream session outlives each of its
 * streams, would wait for ever), and otherwise, while the stream holds bytes,
 * writes an empty chunk whose callback runs once everything queued before it has gone to the
 * kernel. Every re-check is thus driven by the peer reading: nothing polls, nothing spins.
 *
 * When the stream itself holds nothing, the bytes still counted wait ahead of it (`upstream`:
 * ws's compressor), and an empty write's callback would come straight back (process.nextTick):
 * re-checking from it would run in the nextTick queue for ever, and the compressor, whose
 * callback needs the event loop, would never hand those bytes on. The check waits instead for
 * `upstream` to wake it, or, when nothing waits there (text gathered for the end of the current
 * task), for the next turn of the event loop.
 */
export function whenDrained(
  stream: Writable,
  buffered: () => number,
  threshold: number,
  listener: () => void,
  upstream?: Upstream,
): () => void {
  let done = false;
  let waitingForDrain = false;
  let cancelUpstream: (() => void) | undefined;
  const check = (): void => {
    immediate = undefined;
    cancelUpstream = undefined;
    if (waitingForDrain) {
      waitingForDrain = false;
      stream.off('drain', check);
      stream.off('close', check);
    }
    if (done) return;
    // A stream that can no longer write will not drain: let the listener see that for itself.
    if (buffered() <= threshold || stream.destroyed || stream.writableEnded) {
      done = true;
      listener();
      return;
    }
    if (stream.writableNeedDrain) {
      waitingForDrain = true;
      stream.once('drain', check);
      stream.once('close', check);
    } else if (stream.writableLength > 0) {
      stream.write(EMPTY, afterWrite);
    } else {
      cancelUpstream = upstream?.(check);
      if (cancelUpstream === undefined) immediate = setImmediate(check);
    }
  };
  // The write callback gets an error argument; `check` takes none.
  const afterWrite = (): void => check();
  let immediate: ReturnType<typeof setImmediate> | undefined = setImmediate(check);
  return () => {
    done = true;
    if (immediate !== undefined) clearImmediate(immediate);
    immediate = undefined;
    cancelUpstream?.();
    cancelUpstream = undefined;
    if (waitingForDrain) {
      waitingForDrain = false;
      stream.off('drain', check);
      stream.off('close', check);
    }
  };
}
