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

/** How ioredis refuses a command it did not send (the connection is not up; no offline queue). */
const NOT_SENT = "Stream isn't writeable";

/**
 * Whether a command that failed may still have run on Redis: it was sent and its answer was
 * lost (the connection dropped under it, or no answer within the command timeout). False when
 * ioredis did not send it, or Redis answered with an error (a script that fails runs nothing).
 */
export function mayHaveRun(error: unknown): boolean {
  for (let at: unknown = error; at instanceof Error; at = at.cause) {
    if (at.name === 'ReplyError' || at.message.startsWith(NOT_SENT)) return false;
  }
  return true;
}
