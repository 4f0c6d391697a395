/*
 * A broker whose connection stays up while the broker itself hangs (a stopped process, a
 * network path that stops forwarding without closing) looks connected: nothing fails until
 * a command times out, and readiness would not see it. A periodic round trip does: while the
 * checks fail, the broker is not healthy, so `ready` (and /readyz) turns false.
 */

export interface HealthCheckOptions {
  /** Check this often (ms); 0 turns the checks off (always healthy). */
  intervalMs: number;
  /**
   * One round trip to the broker: settles once it answered (or failed). Undefined when there
   * is nothing to check (not connected: readiness already says so).
   */
  check: () => Promise<unknown> | undefined;
  /** A check that has not settled within this many ms fails. Default: the check's own timeout. */
  timeoutMs?: number;
  /** Told once each time the broker turns unhealthy. */
  onFailing: (error: Error) => void;
}

/** Checks in a row that must fail before the broker counts as hung (one late answer is not). */
const FAILURES_BEFORE_UNHEALTHY = 2;

export class HealthCheck {
  /** False once the last checks in a row failed, until one succeeds (or `reset`). */
  healthy = true;
  private failures = 0;
  /** The round trip under way; a new one is not sent while it has not settled. */
  private pending: Promise<unknown> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: HealthCheckOptions) {
    if (options.intervalMs > 0) {
      this.timer = setInterval(() => this.run(), options.intervalMs);
      this.timer.unref();
    }
  }

  /** A new connection: healthy until checks on it fail. */
  reset(): void {
    this.failures = 0;
    this.healthy = true;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private run(): void {
    if (this.pending) {
      // The last round trip is still unanswered: that is a failed check too.
      this.failed(new Error('the previous check is still unanswered'));
      return;
    }
    let pending: Promise<unknown> | undefined;
    try {
      pending = this.options.check();
    } catch (err) {
      this.failed(toError(err));
      return;
    }
    if (!pending) return;
    this.pending = pending;
    let timer: NodeJS.Timeout | undefined;
    const { timeoutMs } = this.options;
    const timedOut =
      timeoutMs === undefined
        ? undefined
        : new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`no answer within ${timeoutMs} ms`)),
              timeoutMs,
            );
          });
    void pending.then(
      () => {
        if (this.pending === pending) this.pending = undefined;
      },
      () => {
        if (this.pending === pending) this.pending = undefined;
      },
    );
    (timedOut ? Promise.race([pending, timedOut]) : pending)
      .then(
        () => {
          this.failures = 0;
          this.healthy = true;
        },
        (err: unknown) => this.failed(toError(err)),
      )
      .finally(() => clearTimeout(timer));
  }

  private failed(error: Error): void {
    if (++this.failures < FAILURES_BEFORE_UNHEALTHY || !this.healthy) return;
    this.healthy = false;
    this.options.onFailing(error);
  }
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
