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

/** Keys whose values createLogger blanks at any depth (compared in lower case). */
const SECRET_KEYS = new Set([
  'token',
  'access_token',
  'password',
  'authorization',
  'cookie',
  'cookies',
  'sec-websocket-protocol',
  'protocols',
]);

/** A query parameter in a URL written as text: `?token=...` or `&access_token=...`. */
const SECRET_QUERY = /([?&](?:token|access_token|password)=)[^&#\s"]*/gi;

/** How deep scrub looks into what is logged: request data (`{ request: { headers } }`) and more. */
const SCRUB_DEPTH = 8;

const CENSOR = '[redacted]';

/**
 * What is logged, with credentials blanked wherever they are: pino's redaction paths reach only
 * the places they name (and a path like `*.password` calls the getter of whatever object is
 * there: a URL's throws on a copy), so before them this replaces the values of SECRET_KEYS at any
 * depth, a URL or URLSearchParams (a hook's `url` and `query`, which would otherwise be written
 * whole, or as `{}`) by its text with secret parameters and any password blanked, and a secret
 * parameter in a string under a key naming a URL. An Error is looked into as well (its
 * message, stack, cause and enumerable properties: scrubError). Objects are copied where
 * something changes, never changed in place (they are the caller's); class instances other than
 * those are left to pino.
 */
export function scrubLogged(value: unknown): unknown {
  return scrub(value, 0, '');
}

function scrub(value: unknown, depth: number, key: string): unknown {
  if (typeof value === 'string') {
    return /url|href|path/i.test(key) ? scrubQuery(value) : value;
  }
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof URL) return scrubUrl(value);
  if (value instanceof URLSearchParams) {
    return Object.fromEntries(
      [...value].map(([k, v]) => [k, SECRET_KEYS.has(k.toLowerCase()) ? CENSOR : v]),
    );
  }
  if (depth >= SCRUB_DEPTH) return value;
  if (Array.isArray(value)) {
    const items = value as readonly unknown[];
    let copy: unknown[] | undefined;
    for (let i = 0; i < items.length; i++) {
      const scrubbed = scrub(items[i], depth + 1, key);
      if (scrubbed !== items[i]) (copy ??= [...items])[i] = scrubbed;
    }
    return copy ?? items;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return value instanceof Error ? scrubError(value, depth) : value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const scrubbed = scrubEntry(k, v, depth);
    if (scrubbed !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = scrubbed;
  }
  return copy ?? value;
}

/** The value of an object's `key`: blanked when the key names a secret, else scrubbed. */
function scrubEntry(key: string, value: unknown, depth: number): unknown {
  return SECRET_KEYS.has(key.toLowerCase()) ? CENSOR : scrub(value, depth + 1, key);
}

/** `text` with its secret query parameters (`?token=...`) blanked. */
function scrubQuery(text: string): string {
  return text.replace(SECRET_QUERY, `$1${CENSOR}`);
}

/**
 * An Error scrubbed: pino's `err` serializer writes its message, stack, cause and every
 * enumerable property (an HTTP client's error carries the request's headers and URL), and
 * JSON.stringify its enumerable properties wherever else it is. When anything in them changes,
 * a copy of the same class (pino names the type from it) with the message and stack (a URL in
 * them included), the cause, an AggregateError's `errors` and the enumerable properties
 * scrubbed; else the error itself. Only errors pay for this, and only when logged.
 */
function scrubError(error: Error, depth: number): Error {
  const message = scrubQuery(error.message);
  const stack = error.stack === undefined ? undefined : scrubQuery(error.stack);
  let changed = message !== error.message || stack !== error.stack;
  const hidden: [string, unknown][] = [];
  for (const key of ['cause', 'errors']) {
    const own = Object.getOwnPropertyDescriptor(error, key);
    if (own === undefined || own.enumerable || !('value' in own)) continue;
    const scrubbed = scrub(own.value, depth + 1, key);
    changed ||= scrubbed !== own.value;
    hidden.push([key, scrubbed]);
  }
  const entries = Object.entries(error).map(([key, value]): [string, unknown] => {
    const scrubbed = scrubEntry(key, value, depth);
    changed ||= scrubbed !== value;
    return [key, scrubbed];
  });
  if (!changed) return error;
  const copy = Object.create(Object.getPrototypeOf(error) as object) as Error;
  const define = (key: string, value: unknown): void => {
    Object.defineProperty(copy, key, { value, writable: true, configurable: true });
  };
  define('message', message);
  define('stack', stack);
  if (Object.hasOwn(error, 'name')) define('name', error.name);
  for (const [key, value] of hidden) define(key, value);
  Object.assign(copy, Object.fromEntries(entries));
  return copy;
}

/** A URL's text with its secret query parameters and password blanked. */
function scrubUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = 'redacted';
  for (const name of new Set(copy.searchParams.keys())) {
    if (SECRET_KEYS.has(name.toLowerCase())) copy.searchParams.set(name, CENSOR);
  }
  return copy.href;
}

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
    redact: { paths: REDACTED_PATHS, censor: CENSOR },
    ...options,
    formatters: {
      ...options.formatters,
      log: (object: Record<string, unknown>) =>
        scrubLogged(options.formatters?.log ? options.formatters.log(object) : object) as Record<
          string,
          unknown
        >,
    },
  };
  const logger = destination ? pino(settings, destination) : pino(settings);
  // A child's bindings are written on each of its lines, and pino formats them with no hook of
  // the root's: scrubbed as they are bound. Its children inherit this `child`.
  // Called on whichever logger `child` is called on (a child's child is made from that child).
  const child = (Object.getPrototypeOf(logger) as { child: PinoLogger['child'] }).child;
  const scrubbingChild = function (this: PinoLogger, bindings, childOptions) {
    return child.call(this, scrubLogged(bindings) as typeof bindings, childOptions);
  } as PinoLogger['child'];
  logger.child = scrubbingChild;
  return logger;
}
