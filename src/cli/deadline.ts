/**
 * The --timeout budget, shared by connecting, the call that follows and the close after it: the
 * whole command ends within it.
 */
export class Deadline {
  private end: number | undefined;

  /** `timeoutMs` 0 never expires. */
  constructor(readonly timeoutMs: number) {
    this.end = timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
  }

  /** Milliseconds left (at least 1), or undefined when there is no limit. */
  remaining(): number | undefined {
    if (this.end === undefined) return undefined;
    return Math.max(1, this.end - Date.now());
  }

  /**
   * `ms`, or what is left of the budget when that is less (0 once it has run out): how long a
   * close may wait for the server without overrunning the limit.
   */
  within(ms: number): number {
    if (this.end === undefined) return ms;
    return Math.min(ms, Math.max(0, this.end - Date.now()));
  }

  /**
   * The limit no longer applies: `subscribe`, once the server answered, runs until stopped or
   * ended, and then closes as any connection without a limit does.
   */
  lift(): void {
    this.end = undefined;
  }
}
