/*
 * How the Redis broker describes its failures. Every part of the broker reports through these,
 * so an outage reads the same ("Redis broker unavailable (host:port): ...") wherever it shows.
 */

/** Any thrown value as an Error, for `onError` and error causes. */
export function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** `host:port` of a Redis URL for error messages, without the credentials it may hold. */
export function describeTarget(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '6379'}`;
  } catch {
    return 'redis';
  }
}

/** The error for an operation refused or lost because Redis cannot be reached. */
export function unavailableError(target: string, reason: unknown): Error {
  const detail = reason === undefined ? 'not connected' : toError(reason).message;
  return new Error(
    `Redis broker unavailable (${target}): ${detail}`,
    reason === undefined ? undefined : { cause: reason },
  );
}
