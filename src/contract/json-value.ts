/**
 * What in a value JSON.stringify would not carry as it is: where, what, and what it would
 * become. `path` leads from the value to it (member names and array indexes, as validation
 * issues give them); empty for the value itself.
 */
export interface NotJsonValue {
  path: (string | number)[];
  /** `"a Date (sent as a string)"`, `"a bigint (cannot be sent)"`, ... */
  found: string;
}

/** Deeper than this the value is not looked into: the encoder and the reader's depth guard decide. */
const MAX_DEPTH = 256;

function instanceName(value: object): string {
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? name : 'an object with a prototype';
}

/** What a non-plain object is, and what JSON makes of it. */
function describeObject(value: object): string | undefined {
  if (value instanceof Date) return 'a Date (sent as a string; use an ISO 8601 string)';
  if (value instanceof Map) return 'a Map (sent as {}; use a record or [key, value] pairs)';
  if (value instanceof Set) return 'a Set (sent as {}; use an array)';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    return 'binary data (not sent as bytes; use a base64 string)';
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) return undefined;
  return `an instance of ${instanceName(value)} (sent as its own members, or its toJSON; use a plain object)`;
}

/** What a value that is not an object is, when JSON does not carry it; `undefined` when it does. */
function describeScalar(value: unknown, inArray: boolean): string | undefined {
  switch (typeof value) {
    case 'bigint':
      return 'a bigint (cannot be sent: JSON.stringify throws; use a decimal string)';
    case 'number':
      return Number.isFinite(value) ? undefined : `${String(value)} (sent as null)`;
    case 'function':
      return 'a function (left out, or null in an array)';
    case 'symbol':
      return 'a symbol (left out, or null in an array)';
    case 'undefined':
      // A member left undefined is left out, as an optional one is; in an array it becomes null.
      return inArray ? 'undefined in an array (sent as null)' : undefined;
    default:
      return undefined;
  }
}

/**
 * The first place in `value` that does not survive JSON.stringify then JSON.parse unchanged
 * (a Date, bigint, Map, Set, function, symbol, NaN or Infinity, binary data, a class instance,
 * a circular reference); `undefined` when it all does. For debug mode: it walks the whole value.
 */
export function findNonJson(value: unknown): NotJsonValue | undefined {
  const path: (string | number)[] = [];
  const open = new Set<object>();
  const visit = (current: unknown, inArray: boolean): string | undefined => {
    if (current === null || typeof current !== 'object') return describeScalar(current, inArray);
    if (path.length >= MAX_DEPTH) return undefined;
    if (open.has(current)) return 'a circular reference (JSON.stringify throws)';
    if (!Array.isArray(current)) {
      const described = describeObject(current);
      if (described) return described;
    }
    open.add(current);
    // By index, so an array's holes are seen (as undefined: JSON writes them as null).
    const entries: [string | number, unknown][] = Array.isArray(current)
      ? Array.from(current as unknown[], (item, i) => [i, item])
      : Object.entries(current);
    for (const [key, member] of entries) {
      path.push(key);
      const found = visit(member, Array.isArray(current));
      if (found) return found;
      path.pop();
    }
    open.delete(current);
    return undefined;
  };
  const found = visit(value, false);
  return found === undefined ? undefined : { path, found };
}
