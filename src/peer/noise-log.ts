import type { Logger } from './logger.js';

/*
 * Throttled logging of protocol noise from the other side. Apart from Peer because it is a
 * policy (how loud a misbehaving peer may make our log), not part of handling a frame.
 */

/**
 * Lines about protocol noise from the other side (responses nobody waits for, malformed ones)
 * logged at warn per connection; later ones go to debug, so a peer cannot flood the log.
 */
export const NOISE_WARN_LIMIT = 10;

/**
 * Log the `count`th line of protocol noise on a connection: the first NOISE_WARN_LIMIT at
 * warn, the rest at debug, counted.
 */
export function logNoise(
  logger: Logger,
  count: number,
  fields: Record<string, unknown>,
  msg: string,
): void {
  if (count < NOISE_WARN_LIMIT) logger.warn({ ...fields, count }, msg);
  else if (count === NOISE_WARN_LIMIT) logger.warn({ ...fields, count, moreAtDebug: true }, msg);
  else logger.debug({ ...fields, count }, msg);
}

/**
 * The most characters of a value the other side chose (a response's id, its error) a line of
 * noise carries: that side makes it as long as its message may be.
 */
export const MAX_SHOWN_NOISE_CHARS = 256;

/** `text` whole up to `maxChars`, else cut there (never inside a surrogate pair). */
export function cutText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const last = text.charCodeAt(maxChars - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? maxChars - 1 : maxChars);
}

/**
 * `fields` (values the other side sent) as a line of noise shows them: one whose text (a
 * string's own, an object's JSON) is longer than MAX_SHOWN_NOISE_CHARS is cut there, its length
 * beside it under `<key>Chars`; anything shorter is shown as it is.
 */
export function shownNoise(fields: Record<string, unknown>): Record<string, unknown> {
  const shown = { ...fields };
  for (const key in fields) {
    const value = fields[key];
    const text =
      typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : '';
    if (text.length > MAX_SHOWN_NOISE_CHARS) {
      shown[key] = cutText(text, MAX_SHOWN_NOISE_CHARS);
      shown[`${key}Chars`] = text.length;
    }
  }
  return shown;
}
