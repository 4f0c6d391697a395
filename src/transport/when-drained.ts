import type { Writable } from 'node:stream';

const EMPTY = Buffer.alloc(0);

/**
 * Call `listener` once `buffered()` (the transport's queued bytes) is at most `threshold`;
 * returns a function that cancels the wait.
 *
 * A Node stream emits 'drain' only after a `write()` returned false (at least
 * `writableHighWaterMark`, 16 KiB for a socket, queued), so waiting for 'drain' alone would
 * never end for a smaller backlog. The first check runs after the corked writes have been
 * flushed (setImmediate: the turn coalescer flushes in a microtask); then, while bytes remain,
 * it waits for 'drain' when the stream owes one, and otherwise writes an empty chunk whose
 * callback runs once everything queued before it has gone to the kernel. Every re-check is
 * thus driven by the peer reading: nothing polls, nothing spins.
 */
export function whenDrained(
  stream: Writable,
  buffered: () => number,
  threshold: number,
  listener: () => void,
): () => void {
  let done = false;
  let waitingForDrain = false;
  const check = (): void => {
    immediate = undefined;
    if (waitingForDrain) {
      waitingForDrain = false;
      stream.off('drain', check);
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
    } else {
      stream.write(EMPTY, afterWrite);
    }
  };
  // The write callback gets an error argument; `check` takes none.
  const afterWrite = (): void => check();
  let immediate: ReturnType<typeof setImmediate> | undefined = setImmediate(check);
  return () => {
    done = true;
    if (immediate !== undefined) clearImmediate(immediate);
    immediate = undefined;
    if (waitingForDrain) {
      waitingForDrain = false;
      stream.off('drain', check);
    }
  };
}
