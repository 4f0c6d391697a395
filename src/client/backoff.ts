export interface BackoffOptions {
  /** Delay before the first reconnect attempt, ms. Default 250. */
  initialDelayMs: number;
  /** Cap on the delay, ms. Default 10 000. */
  maxDelayMs: number;
  /** Growth per failed attempt. Default 2. */
  factor: number;
  /** Fraction of each delay that is randomized (0 = none, 1 = full jitter). Default 0.5. */
  jitter: number;
  /**
   * A connection counts as good once it has stayed open this long, ms: only then does the
   * backoff start again from `initialDelayMs`. One that drops sooner (a server that accepts
   * and closes at once) counts as a failed attempt, so the delay keeps growing. Default 5 000.
   */
  resetAfterMs: number;
}

export const defaultBackoff: BackoffOptions = {
  initialDelayMs: 250,
  maxDelayMs: 10_000,
  factor: 2,
  jitter: 0.5,
  resetAfterMs: 5_000,
};

/**
 * Capped exponential backoff with jitter, so a restarted server is not hit by
 * every client in the same millisecond. `attempt` counts from 0.
 */
export function backoffDelay(
  attempt: number,
  options: Pick<BackoffOptions, 'initialDelayMs' | 'maxDelayMs' | 'factor' | 'jitter'>,
  random: () => number = Math.random,
): number {
  const base = Math.min(options.maxDelayMs, options.initialDelayMs * options.factor ** attempt);
  const jitter = Math.min(1, Math.max(0, options.jitter));
  return Math.round(base * (1 - jitter * random()));
}
