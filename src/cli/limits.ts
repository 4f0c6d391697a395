/**
 * What the CLI takes from a server, at most: a server that sends more is talking nonsense or
 * means harm, and the command ends with exit 3 saying which limit it passed (docs/cli.md).
 */

/**
 * Largest message in bytes, as sent: a WebSocket message, a tcp:// line (UTF-8), an HTTP body
 * (an OpenRPC document can be large).
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** Deepest nesting of a message, the whole message counted (the gateway's own default). */
export const MAX_DEPTH = 64;
/**
 * Notification text kept while the subscribe answer is on its way, in UTF-8 bytes
 * (measured only when its length cannot decide: Utf8Budget).
 */
export const MAX_EARLY_BYTES = 16 * 1024 * 1024;
/**
 * Longest indented text of an answer `call` and `discover` print, in UTF-16 code units: an answer
 * whose indented JSON would be longer (many elements nested deep: each is written on a line of
 * its own after 2 spaces per level) is printed compact, on one line, as `subscribe` prints.
 */
export const MAX_INDENTED_TEXT = 64 * 1024 * 1024;
/** Notifications kept while the subscribe answer is on its way; past it they are dropped. */
export const MAX_EARLY_MESSAGES = 10_000;

/** `n` bytes for a person: `64 MiB`. */
export function mebibytes(n: number): string {
  return `${n / (1024 * 1024)} MiB`;
}

/** A message nested past MAX_DEPTH, from the server at `hostPort`. */
export function nestedTooDeep(hostPort: string): string {
  return `${hostPort} sent a message nested deeper than ${MAX_DEPTH} levels (the CLI's limit); it was not read`;
}

/**
 * A message whose bytes are not UTF-8, from the server at `hostPort`: JSON text is UTF-8 (RFC 8259,
 * section 8.1), and read with U+FFFD in place of the bad bytes it would print what the server
 * never sent.
 */
export function notUtf8(hostPort: string): string {
  return `${hostPort} sent a message that is not UTF-8; it was not read`;
}
