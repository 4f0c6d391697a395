// The checks both ends run on their options when they are made (`resolveGatewayOptions`,
// `resolveClientOptions`): one small rule per option, and one message shape for every refusal,
// naming the option and what it may be. Kept small: the browser client bundles it.

/** Checks one given value (never undefined); throws a TypeError or RangeError naming `name`. */
export type Rule = (value: unknown, name: string) => void;

/** An object of options: not null, not an array, not a Set or Map (a YAML !!set or !!omap). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Set) &&
    !(value instanceof Map)
  );
}

/**
 * How a refused value is shown: a number as JavaScript writes it (JSON has Infinity and NaN as
 * null), else as JSON where it can be, else by its type; cut after 200 characters. `name` is the
 * path the value was given at. A value that may hold a secret is never shown:
 * - under a secret-bearing path (a segment such as `keys`, `secret`, `password`, `passphrase`,
 *   `token`, `credentials`, `authorization`, `cookie`, or a name ending in one, like `apiKey`),
 *   a string, array or object is told by its type and length only ("a string of 34
 *   characters"), a number by its type ("a number"); booleans and null are shown;
 * - a URL under a path ending in `url`, `urls` or `servers` is shown with its userinfo and its
 *   query and fragment replaced by `***`; any other string holding `//` with its userinfo masked.
 */
export function describe(value: unknown, name = ''): string {
  if (isSecretPath(name) && hidden(value)) return describeSecret(value);
  const urlPath = isUrlPath(name);
  if (typeof value === 'string') return cut(JSON.stringify(maskIfUrl(value, urlPath)));
  if (value instanceof Set) return `a Set of ${value.size} (a YAML !!set, not a mapping)`;
  if (value instanceof Map)
    return `a Map of ${value.size} (a YAML !!omap or !!pairs, not a mapping)`;
  return cut(
    typeof value === 'function'
      ? 'a function'
      : typeof value === 'number'
        ? `${value}`
        : (JSON.stringify(value, function (this: unknown, key: string, item: unknown) {
            if (key !== '' && !Array.isArray(this) && isSecretPath(key) && hidden(item)) {
              return describeSecret(item);
            }
            return typeof item === 'string' ? maskIfUrl(item, urlPath || isUrlPath(key)) : item;
          }) ?? typeof value),
  );
}

const SECRET_SEGMENT =
  /(?:^|[a-z0-9_-])(?:keys?|secrets?|passwords?|passphrase|tokens?|credentials?|authorization|cookies?)$/i;

/** Whether a segment of the path `name` ("serverApi.keys[0]", "jwt.secret") names a secret. */
export function isSecretPath(name: string): boolean {
  return name.split(/[.[\]]/).some((segment) => segment !== '' && SECRET_SEGMENT.test(segment));
}

function isUrlPath(name: string): boolean {
  return /(?:urls?|servers)(?:\[\d+\])?$/i.test(name);
}

/**
 * Whether a value under a secret-bearing path is hidden: all but booleans, null and undefined (an
 * unquoted `${KEY}` of digits is a number, and the secret all the same).
 */
function hidden(value: unknown): boolean {
  return value != null && typeof value !== 'boolean';
}

/** A secret told by its type and length, never its value. */
function describeSecret(value: unknown): string {
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  if (Array.isArray(value))
    return `an array of ${value.length} item${value.length === 1 ? '' : 's'}`;
  if (value instanceof Uint8Array) return `a Uint8Array of ${value.length} bytes`;
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function maskIfUrl(text: string, urlPath: boolean): string {
  return urlPath ? maskUrl(text) : text.includes('//') ? maskUrl(text, false) : text;
}

/**
 * `url` with its userinfo ("user:password@") and, unless `withQuery` is false, its query and fragment
 * replaced by `***`, kept otherwise as given (not parsed: a malformed URL is masked the same way).
 */
export function maskUrl(url: string, withQuery = true): string {
  const query = withQuery ? url.search(/[?#]/) : -1;
  let head = query < 0 ? url : url.slice(0, query);
  const slashes = head.indexOf('//');
  const start = slashes < 0 ? 0 : slashes + 2;
  const slash = head.indexOf('/', start);
  const end = slash < 0 ? head.length : slash;
  const at = head.lastIndexOf('@', end - 1);
  if (at >= start) head = `${head.slice(0, start)}***${head.slice(at)}`;
  return query < 0 ? head : `${head}${url[query]}***`;
}

/** `text` cut after 200 characters, with "...": a message names a value, not all of it. */
export function cut(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/** Refuse `value` for `name`: a TypeError, or a RangeError when it is the right type out of range. */
export function refuse(name: string, expected: string, value: unknown, range = false): never {
  throw new (range ? RangeError : TypeError)(
    `${name} must be ${expected}, not ${describe(value, name)}`,
  );
}

/** A number in [min, max] (an integer if `integer`); `note` says what special values mean. */
export function numberIn(min: number, max: number, integer = false, note = ''): Rule {
  const what = `${integer ? 'an integer' : 'a number'} ${max === Infinity ? `at least ${min}` : `from ${min} to ${max}`}${note}`;
  return (value, name) => {
    if (typeof value !== 'number' || Number.isNaN(value)) refuse(name, what, value);
    if (value < min || value > max || (integer && !Number.isInteger(value))) {
      refuse(name, what, value, true);
    }
  };
}

/** A value of one `typeof` ('boolean', 'function', 'string', 'object': not null, not an array). */
export function ofType(type: string, what = `a ${type}`): Rule {
  return (value, name) => {
    if (typeof value !== type || value === null || (type === 'object' && !isRecord(value))) {
      refuse(name, what, value);
    }
  };
}

/** An array of strings. */
export const strings: Rule = (value, name) => {
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) {
    refuse(name, 'an array of strings', value);
  }
};

/** One of a few strings. */
export function oneOf(...allowed: string[]): Rule {
  const what = allowed.map((a) => `"${a}"`).join(' or ');
  return (value, name) => {
    if (!allowed.includes(value as string)) refuse(name, what, value, typeof value === 'string');
  };
}

/** Either of two rules (the first one's error when neither holds). */
export function either(first: Rule, second: Rule): Rule {
  return (value, name) => {
    try {
      first(value, name);
    } catch (err) {
      try {
        second(value, name);
      } catch {
        throw err;
      }
    }
  };
}

/**
 * Check `options` (an object, or undefined for none) against `rules`: a key with no rule is
 * refused with a TypeError, naming the closest known key; each value that is not undefined
 * must pass its rule (null rules are checked elsewhere). Returns the options that are not
 * undefined, so they can be spread over defaults. `prefix` is the path to `options`
 * ("" or "reconnect."), `owner` what they are options of; `deprecated` names are never
 * suggested.
 */
export function checkOptions(
  options: unknown,
  rules: Readonly<Record<string, Rule | null>>,
  prefix: string,
  owner: string,
  deprecated: readonly string[] = [],
): Record<string, unknown> {
  if (options === undefined) return {};
  if (!isRecord(options)) refuse(prefix ? prefix.slice(0, -1) : owner, 'an object', options);
  const defined: Record<string, unknown> = {};
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(rules, key)) {
      const near = closest(
        key,
        Object.keys(rules).filter((name) => !deprecated.includes(name)),
      );
      throw new TypeError(
        `${prefix}${cut(key)} is not an option of ${owner}${near ? ` (did you mean ${prefix}${near}?)` : ''}`,
      );
    }
    const rule = rules[key];
    const value = options[key];
    if (value === undefined) continue;
    rule?.(value, prefix + key);
    defined[key] = value;
  }
  return defined;
}

/**
 * The known name nearest `key` in edits (Levenshtein, ignoring case), if one is near enough to
 * be what was meant. One row of the distance table at a time: the browser client carries it.
 */
function closest(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  const a = key.toLowerCase();
  for (const name of known) {
    const b = name.toLowerCase();
    let row = [...Array(b.length + 1).keys()];
    for (let i = 0; i < a.length; i++) {
      const next = [i + 1];
      for (let j = 0; j < b.length; j++) {
        next[j + 1] = Math.min(row[j + 1]! + 1, next[j]! + 1, row[j]! + (a[i] === b[j] ? 0 : 1));
      }
      row = next;
    }
    if (row[b.length]! < bestDistance) [best, bestDistance] = [name, row[b.length]!];
  }
  return best;
}

/**
 * A renamed option: the value of `name`, or of its deprecated `alias` when only that is given.
 * Both given with different values is a TypeError.
 */
export function renamed(options: object, name: string, alias: string): unknown {
  const value = (options as Record<string, unknown>)[name];
  const old = (options as Record<string, unknown>)[alias];
  if (value !== undefined && old !== undefined && !Object.is(value, old)) {
    throw new TypeError(`${alias} is the old name of ${name}: give one of them, not both`);
  }
  return value ?? old;
}
