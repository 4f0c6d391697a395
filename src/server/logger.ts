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
  'proxy-authorization',
  'cookie',
  'cookies',
  'set-cookie',
  'sec-websocket-protocol',
  'protocols',
  // Node's ClientRequest keeps the request's whole head here as text, every header in it.
  '_header',
]);

/** A query parameter in a URL written as text: `?token=...` or `&access_token=...`. */
const SECRET_QUERY = /([?&](?:token|access_token|password)=)[^&#\s"]*/gi;

/**
 * A secret header written as text, up to the end of its line: `Authorization: Bearer ...`,
 * `Proxy-Authorization:`, `Cookie:`, `Set-Cookie:`, `Sec-WebSocket-Protocol:` (a request's head,
 * curl-style header lists, a message quoting one).
 */
const SECRET_HEADER_TEXT =
  /\b(authorization|cookies?|sec-websocket-protocol)(["']?[ \t]*:[ \t]*)[^\r\n]*/gi;

/** Keys whose string values are text to scrub outside errors (inside errors every string is). */
const TEXT_KEY = /url|href|path|header/i;

/** Node's names-and-values lists of an HTTP message's headers (IncomingMessage's). */
const RAW_HEADER_KEYS = new Set(['rawHeaders', 'rawTrailers']);

/** How deep scrub looks into what is logged: request data (`{ request: { headers } }`) and more. */
const SCRUB_DEPTH = 8;

/**
 * The most objects one scrub looks into; past it an object is written TRUNCATED. The depth alone
 * does not bound the work: an object whose many members lead back to it (only application code
 * makes one) would be walked once per path, exponentially many.
 */
const SCRUB_OBJECTS = 10_000;
let objectsLeft = SCRUB_OBJECTS;

const CENSOR = '[redacted]';
/** Written in place of an object met again inside itself. */
const CIRCULAR = '[Circular]';
/** Written in place of an object deeper than SCRUB_DEPTH, which scrub has not looked into. */
const TRUNCATED = '[Truncated]';
/** Written in place of a property whose getter threw. */
const UNREADABLE = '[Unreadable]';

/**
 * The objects met inside an error, each with what it was scrubbed to (IN_PROGRESS while its
 * own properties are): an error's properties may lead back to it (an HTTP client's request and
 * its socket refer to each other) or share objects, and each is looked into once.
 */
type Met = WeakMap<object, unknown>;
const IN_PROGRESS = Symbol('scrubbing');
const THREW = Symbol('threw');

/**
 * What is logged, with credentials blanked wherever they are: pino's redaction paths reach only
 * the places they name (and a path like `*.password` calls the getter of whatever object is
 * there: a URL's throws on a copy), so before them this replaces the values of SECRET_KEYS at any
 * depth, a URL or URLSearchParams (a hook's `url` and `query`, which would otherwise be written
 * whole, or as `{}`) by its text with secret parameters and any password blanked, and a secret
 * parameter or header in a string under a key naming a URL or headers. Past SCRUB_DEPTH, or
 * past SCRUB_OBJECTS objects, an object is written TRUNCATED. An Error is looked into as well (scrubError), and with it the
 * class instances it holds (an HTTP client's request). Objects are copied where something
 * changes, never changed in place (they are the caller's); class instances outside errors are
 * left to pino.
 */
export function scrubLogged(value: unknown): unknown {
  objectsLeft = SCRUB_OBJECTS;
  return scrub(value, 0, '', undefined);
}

/** `value` scrubbed; `met` is set inside an error (and only there: the plain path pays nothing). */
function scrub(value: unknown, depth: number, key: string, met: Met | undefined): unknown {
  if (typeof value === 'string') {
    return met !== undefined || TEXT_KEY.test(key) ? scrubText(value) : value;
  }
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof URL) return scrubUrl(value);
  if (value instanceof URLSearchParams) {
    return Object.fromEntries(
      [...value].map(([k, v]) => [k, SECRET_KEYS.has(k.toLowerCase()) ? CENSOR : v]),
    );
  }
  if (depth >= SCRUB_DEPTH || --objectsLeft < 0) return TRUNCATED;
  return met === undefined
    ? scrubObject(value, depth, key, undefined)
    : scrubOnce(value, depth, key, met);
}

/** `value` scrubbed once however often it is met inside an error; met inside itself, CIRCULAR. */
function scrubOnce(value: object, depth: number, key: string, met: Met): unknown {
  const known = met.get(value);
  if (known !== undefined) return known === IN_PROGRESS ? CIRCULAR : known;
  met.set(value, IN_PROGRESS);
  const scrubbed = scrubObject(value, depth, key, met);
  met.set(value, scrubbed);
  return scrubbed;
}

function scrubObject(value: object, depth: number, key: string, met: Met | undefined): unknown {
  if (Array.isArray(value)) return scrubArray(value as readonly unknown[], depth, key, met);
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) return scrubPlain(value, depth, met);
  if (value instanceof Error) {
    return met === undefined
      ? scrubOnce(value, depth, key, new WeakMap())
      : scrubError(value, depth, met);
  }
  return met === undefined ? value : scrubInstance(value, depth, met);
}

function scrubArray(
  items: readonly unknown[],
  depth: number,
  key: string,
  met: Met | undefined,
): readonly unknown[] {
  if (met !== undefined && RAW_HEADER_KEYS.has(key)) return scrubRawHeaders(items);
  let copy: unknown[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const scrubbed = scrub(items[i], depth + 1, key, met);
    if (scrubbed !== items[i]) (copy ??= [...items])[i] = scrubbed;
  }
  return copy ?? items;
}

/** Names and values in turn (`['Set-Cookie', 'sid=...', ...]`): a secret header's value blanked. */
function scrubRawHeaders(items: readonly unknown[]): unknown[] {
  return items.map((item, i) => {
    const name = i % 2 === 1 ? items[i - 1] : undefined;
    if (typeof name === 'string' && SECRET_KEYS.has(name.toLowerCase())) return CENSOR;
    return typeof item === 'string' ? scrubText(item) : item;
  });
}

function scrubPlain(value: object, depth: number, met: Met | undefined): unknown {
  let copy: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const scrubbed = scrubEntry(k, v, depth, met);
    if (scrubbed !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = scrubbed;
  }
  return copy ?? value;
}

/**
 * A class instance met inside an error (an HTTP client's request, its socket, a headers class):
 * its own enumerable properties, which are what JSON writes of it, scrubbed like a plain
 * object's; when any changes, a plain object of them. Binary data is left as it is (its indices
 * are its own properties: a large buffer would cost one step each).
 */
function scrubInstance(value: object, depth: number, met: Met): unknown {
  if (ArrayBuffer.isView(value)) return value;
  const { entries, changed } = scrubOwnEntries(value, depth, met);
  return changed ? Object.fromEntries(entries) : value;
}

/** The value of an object's `key`: blanked when the key names a secret, else scrubbed. */
function scrubEntry(key: string, value: unknown, depth: number, met: Met | undefined): unknown {
  return SECRET_KEYS.has(key.toLowerCase()) ? CENSOR : scrub(value, depth + 1, key, met);
}

/** An object's own enumerable properties scrubbed, each read on its own (a getter may throw). */
function scrubOwnEntries(object: object, depth: number, met: Met) {
  let changed = false;
  const entries = Object.keys(object).map((key): [string, unknown] => {
    const value = readProperty(object, key);
    const scrubbed = value === THREW ? UNREADABLE : scrubEntry(key, value, depth, met);
    changed ||= scrubbed !== value;
    return [key, scrubbed];
  });
  return { entries, changed };
}

function readProperty(object: object, key: string): unknown {
  try {
    return (object as Record<string, unknown>)[key];
  } catch {
    return THREW;
  }
}

/** `text` with its secret query parameters (`?token=...`) and secret headers' values blanked. */
function scrubText(text: string): string {
  return text.replace(SECRET_QUERY, `$1${CENSOR}`).replace(SECRET_HEADER_TEXT, `$1$2${CENSOR}`);
}

/** An error's parts, scrubbed: what a copy of it is made of. */
interface ScrubbedParts {
  message: unknown;
  stack: unknown;
  /** `cause` and an AggregateError's `errors` when they are own but not enumerable. */
  hidden: [string, unknown][];
  /** The own enumerable properties. */
  entries: [string, unknown][];
  changed: boolean;
}

/**
 * An Error scrubbed: pino's `err` serializer writes its message, stack, cause and every
 * enumerable property (an HTTP client's error carries the request's headers and URL), and
 * JSON.stringify its enumerable properties wherever else it is. When anything in them changes,
 * a copy with the message and stack (a URL or header in them included), the cause, an
 * AggregateError's `errors` and the enumerable properties scrubbed; else the error itself. Only
 * errors pay for this, and only when logged. Nothing here may throw (a throw inside pino's
 * formatter is a throw from logger.error(), at the handler's failure: an uncaught exception):
 * whatever an error does that scrubErrorParts does not expect, its name and message are written.
 */
function scrubError(error: Error, depth: number, met: Met): unknown {
  try {
    return scrubErrorParts(error, depth, met);
  } catch {
    return errorSummary(error);
  }
}

/**
 * The error itself when nothing changes, it is shaped as pino expects (a string message, a
 * string or no stack) and it can take pino's marker (a frozen one cannot: pino's serializer
 * throws); else a copy of its class when that is safe (copiesSafely), else a plain object.
 */
function scrubErrorParts(error: Error, depth: number, met: Met): unknown {
  const message: unknown = error.message;
  const stack: unknown = error.stack;
  const parts = scrubParts(error, message, stack, depth, met);
  const shaped = typeof message === 'string' && (stack === undefined || typeof stack === 'string');
  if (!parts.changed && shaped && Object.isExtensible(error)) return error;
  return shaped && copiesSafely(error) ? copyOfClass(error, parts) : plainError(error, parts);
}

function scrubParts(
  error: Error,
  message: unknown,
  stack: unknown,
  depth: number,
  met: Met,
): ScrubbedParts {
  const scrubbedMessage = scrub(message, depth + 1, 'message', met);
  const scrubbedStack = scrub(stack, depth + 1, 'stack', met);
  let changed = scrubbedMessage !== message || scrubbedStack !== stack;
  const hidden: [string, unknown][] = [];
  for (const key of ['cause', 'errors']) {
    const own = Object.getOwnPropertyDescriptor(error, key);
    if (own === undefined || own.enumerable || !('value' in own)) continue;
    const scrubbed = scrub(own.value, depth + 1, key, met);
    changed ||= scrubbed !== own.value;
    hidden.push([key, scrubbed]);
  }
  const own = scrubOwnEntries(error, depth, met);
  changed ||= own.changed;
  return { message: scrubbedMessage, stack: scrubbedStack, hidden, entries: own.entries, changed };
}

/**
 * Whether a copy made with Object.create of the error's prototype reads as the error: no
 * prototype between it and Error.prototype has an accessor. A host object's (DOMException's
 * `message`, `name`, `code`) checks that it is called on a real one and throws on a copy.
 */
function copiesSafely(error: Error): boolean {
  for (
    let proto = Object.getPrototypeOf(error) as object | null;
    proto !== Error.prototype;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    if (proto === null || !holdsOnlyValues(proto)) return false;
  }
  return true;
}

function holdsOnlyValues(object: object): boolean {
  return Reflect.ownKeys(object).every(
    (key) => 'value' in (Object.getOwnPropertyDescriptor(object, key) ?? { value: undefined }),
  );
}

/** A copy of the same class (pino names the type from it) made of the scrubbed parts. */
function copyOfClass(error: Error, parts: ScrubbedParts): Error {
  const copy = Object.create(Object.getPrototypeOf(error) as object) as Error;
  const define = (key: string, value: unknown, enumerable: boolean): void => {
    Object.defineProperty(copy, key, { value, writable: true, configurable: true, enumerable });
  };
  define('message', parts.message, false);
  define('stack', parts.stack, false);
  if (Object.hasOwn(error, 'name')) define('name', error.name, false);
  for (const [key, value] of parts.hidden) define(key, value, false);
  for (const [key, value] of parts.entries) define(key, value, true);
  return copy;
}

/**
 * A plain object of the scrubbed parts, for an error no copy can stand for: `type` (its name),
 * `message`, `stack`, then its own enumerable properties; the hidden cause and errors stay
 * hidden (pino reads them, JSON does not). No prototype: pino's serializer then takes the type
 * from `type`, and a key `__proto__` is a key like any other.
 */
function plainError(error: Error, parts: ScrubbedParts): Record<string, unknown> {
  const plain = Object.create(null) as Record<string, unknown>;
  plain['type'] = nameOf(error);
  if (parts.message !== undefined) plain['message'] = parts.message;
  if (parts.stack !== undefined) plain['stack'] = parts.stack;
  for (const [key, value] of parts.hidden) {
    Object.defineProperty(plain, key, { value, writable: true, configurable: true });
  }
  for (const [key, value] of parts.entries) {
    if (!(key in plain)) plain[key] = value;
  }
  return plain;
}

/** What is written of an error whose scrubbing threw: its name and, when a string, its message. */
function errorSummary(error: Error): Record<string, unknown> {
  const summary = Object.create(null) as Record<string, unknown>;
  summary['type'] = nameOf(error);
  const message = readProperty(error, 'message');
  if (typeof message === 'string') summary['message'] = scrubText(message);
  return summary;
}

function nameOf(error: Error): string {
  const name = readProperty(error, 'name');
  return typeof name === 'string' && name !== '' ? name : 'Error';
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
