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

/** The levels LOG_LEVEL may name: pino's, and `silent` (nothing logged). */
const LOG_LEVELS = [...Object.keys(pino.levels.values), 'silent'];

/**
 * The level a LOG_LEVEL of `value` names, `info` when it is unset or empty. Any other value than
 * one of pino's levels (or `customLevels`) is refused naming it: pino's own message ("default
 * level:verbose must be included in custom levels") names neither the variable nor what it may
 * be. The one check of LOG_LEVEL: createLogger, and the CLI's serve and check-config, use it.
 */
export function logLevelOf(
  value: string | undefined,
  customLevels: Readonly<Record<string, number>> = {},
): string {
  if (value === undefined || value === '') return 'info';
  const levels = [...LOG_LEVELS, ...Object.keys(customLevels)];
  if (!levels.includes(value)) {
    throw new RangeError(
      `LOG_LEVEL must be one of ${levels.join(', ')}, not ${JSON.stringify(value.slice(0, 100))}${value.length > 100 ? '...' : ''}`,
    );
  }
  return value;
}

/**
 * The gateway's default logger: pino at LOG_LEVEL (default info; unset or empty is info), with
 * credentials redacted. Throws a RangeError naming LOG_LEVEL when it is not a level of pino's.
 */
export function createLogger(
  options: LoggerOptions = {},
  /** Where lines go; default stdout. Pass `pino.destination(2)` when stdout carries NDJSON (stdio). */
  destination?: DestinationStream,
): PinoLogger {
  const settings = {
    level: options.level ?? logLevelOf(process.env['LOG_LEVEL'], options.customLevels),
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...options,
  };
  return destination ? pino(settings, destination) : pino(settings);
}
