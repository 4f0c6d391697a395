/**
 * `done`, once: when `run` settles (either way), or after `maxMs` if it has not by then. For a
 * run nothing waits for any more (a hook given up on) whose hold on something must end even if
 * it never settles.
 */
export function settledOrAfter(run: PromiseLike<unknown>, maxMs: number, done: () => void): void {
  let pending = true;
  const once = (): void => {
    if (!pending) return;
    pending = false;
    clearTimeout(giveUp);
    done();
  };
  const giveUp = setTimeout(once, maxMs);
  // A bound, not a reason to keep the process alive (Node; a browser's timer has no unref).
  (giveUp as { unref?: () => void }).unref?.();
  run.then(once, once);
}
