import { pino } from 'pino';
import type { DestinationStream, Logger as PinoLogger, LoggerOptions } from 'pino';

/**
 * Paths pino blanks out in every log line, wherever a hook or handler logs
 * request data: credentials must never reach the logs.
 */
export const REDACTED_PATHS = [
  'token',
  'password',
  'authorization',
  'cookie',
  'cookies',
  '*.token',
  '*.password',
  '*.authorization',
  '*.cookie',
  '*.cookies',
  'headers.authorization',
  'headers.cookie',
  'headers["sec-websocket-protocol"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["sec-websocket-protocol"]',
  'query.token',
  'query.access_token',
];

/** The gateway's default logger: pino at LOG_LEVEL (default info), with credentials redacted. */
export function createLogger(
  options: LoggerOptions = {},
  /** Where lines go; default stdout. Pass `pino.destination(2)` when stdout carries NDJSON (stdio). */
  destination?: DestinationStream,
): PinoLogger {
  const settings = {
    level: process.env['LOG_LEVEL'] ?? 'info',
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...options,
  };
  return destination ? pino(settings, destination) : pino(settings);
}
