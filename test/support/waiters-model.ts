/**
 * The model of a list of waiters told together (DrainWaiters, LinkWaiters), for their property
 * tests: who waits, who cancelled, and, in the order they began to wait, who is due to be told
 * (`modelTold`) beside who the real one told (`told`).
 */
export class WaitersModel {
  /** What each `wait` returned, by the waiter's number. */
  readonly cancels: (() => void)[] = [];
  /** The waiters the real list told, by number, in the order it told them. */
  readonly told: number[] = [];
  /** The model: waiting now. */
  readonly waiting = new Set<number>();
  /** The model: told so far. */
  readonly modelTold: number[] = [];

  /** A new waiter, through `wait` (the real list's), numbered in turn. */
  wait(wait: (listener: () => void) => () => void): void {
    const i = this.cancels.length;
    this.cancels.push(wait(() => this.told.push(i)));
    this.waiting.add(i);
  }

  /** Waiter `which` (modulo those made) gives up; a waiter told already, or twice, changes nothing. */
  cancel(which: number): void {
    if (this.cancels.length === 0) return;
    const i = which % this.cancels.length;
    this.cancels[i]!();
    this.waiting.delete(i);
  }

  /** Everyone waiting is told. */
  tellAll(): void {
    this.modelTold.push(...this.waiting);
    this.waiting.clear();
  }
}
