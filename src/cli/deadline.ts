/** The --timeout budget, shared by connecting and the call that follows. */
export class Deadline {
  private readonly end: number | undefined;

  /** `timeoutMs` 0 never expires. */
  constructor(readonly timeoutMs: number) {
    this.end = timeoutMs > 0 ? Date.now() + timeoutMs : undefined;
  }

  /** Milliseconds left (at least 1), or undefined when there is no limit. */
  remaining(): number | undefined {
    if (this.end === undefined) return undefined;
    return Math.max(1, this.end - Date.now());
  }
}
