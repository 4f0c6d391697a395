import { Worker } from 'node:worker_threads';

/**
 * What a gateway running inside the test process cannot do for itself: notice that the event
 * loop has stopped turning. A livelock in the nextTick queue freezes the test too (within() and
 * vitest's own timeout are timers of the frozen loop), so the run would hang instead of failing.
 * A worker thread watches a counter the main thread bumps from a timer; when the counter stands
 * still for `frozenMs`, it writes why to stderr and kills the process, which vitest reports as a
 * failed test file. Returns the function that stops the watch.
 */
export function watchEventLoop(frozenMs = 15_000): () => void {
  const beats = new Int32Array(new SharedArrayBuffer(4));
  const beat = setInterval(() => Atomics.add(beats, 0, 1), 100);
  beat.unref();
  const worker = new Worker(
    `
    const { workerData } = require('node:worker_threads');
    const { writeSync } = require('node:fs');
    const { beats, frozenMs } = workerData;
    let seen = Atomics.load(beats, 0);
    let since = Date.now();
    setInterval(() => {
      const now = Atomics.load(beats, 0);
      if (now !== seen) {
        seen = now;
        since = Date.now();
      } else if (Date.now() - since > frozenMs) {
        writeSync(2, 'event-loop watchdog: the test process has not run a timer for ' + frozenMs + ' ms (a livelock); killing it\\n');
        process.kill(process.pid, 'SIGKILL');
      }
    }, 250);
    `,
    { eval: true, workerData: { beats, frozenMs } },
  );
  worker.unref();
  return () => {
    clearInterval(beat);
    void worker.terminate();
  };
}
