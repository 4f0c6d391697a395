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
