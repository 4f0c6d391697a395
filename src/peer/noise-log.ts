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
