import type { TokenRequest } from './client-options.js';

/**
 * Call `then` with `signal`'s reason when it aborts, at once when it has; the function returned
 * stops listening (call it once the wait is over: a signal that outlives it keeps no listener).
 */
export function onAbort(
  signal: AbortSignal | undefined,
  then: (reason: unknown) => void,
): () => void {
  const listener = (): void => then(signal!.reason);
  if (signal?.aborted) listener();
  else signal?.addEventListener('abort', listener);
  return () => signal?.removeEventListener('abort', listener);
}

/**
 * What `work` gives when called with `{ signal }`, or `signal`'s reason as soon as it aborts:
 * nothing waits on work whose signal aborted (a getToken that hangs), and what it gives later
 * goes nowhere. Once `signal` has aborted, `work` is not called at all.
 */
export const whileWanted = <T>(
  signal: AbortSignal,
  work: (request: TokenRequest) => T | Promise<T>,
): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const stop = onAbort(signal, reject);
    // Not asked at all once unwanted already.
    if (!signal.aborted) Promise.resolve({ signal }).then(work).then(resolve, reject).finally(stop);
  });

/**
 * One run of a piece of work (a getToken) shared by everyone who wants its result while it runs.
 * Each caller waits with a signal of its own and is answered with that signal's reason as soon
 * as it aborts, alone: the others still get the result. The run's own signal aborts once the
 * last caller waiting on it has given up, and the next caller starts a new run, as does the
 * first one after a run has settled.
 */
export class SharedRun<T> {
  #run: { result: Promise<T>; wanted: AbortController; waiting: number } | undefined;

  /** The current run's result for a caller wanting it while `signal` has not aborted; `work` starts a run when none is under way. */
  want(signal: AbortSignal, work: (request: TokenRequest) => T | Promise<T>): Promise<T> {
    // Unwanted already: no run is started for it.
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    let run = this.#run;
    if (!run) {
      const wanted = new AbortController();
      const started = { result: whileWanted(wanted.signal, work), wanted, waiting: 0 };
      const over = (): void => {
        if (this.#run === started) this.#run = undefined;
      };
      // Also what keeps a run nobody waits on any more from an unhandled rejection.
      started.result.then(over, over);
      run = this.#run = started;
    }
    const mine = run;
    mine.waiting++;
    return new Promise<T>((resolve, reject) => {
      const stop = onAbort(signal, (reason) => {
        reject(reason as Error);
        if (--mine.waiting === 0 && this.#run === mine) this.giveUp(reason);
      });
      mine.result.then(resolve, reject).finally(stop);
    });
  }

  /** Nobody wants the current run's result any more (its client closed): its signal aborts. */
  giveUp(reason: unknown): void {
    const run = this.#run;
    this.#run = undefined;
    run?.wanted.abort(reason);
  }
}
