/**
 * JSON.parse plus the guards a server facing the internet needs:
 *  - nesting depth, checked on the raw text before parsing so a hostile
 *    `[[[[...` never reaches the recursive parser;
 *  - the number of values, counted in the same pass, so a message of a million tiny values
 *    (`[{},{},...]`, a quarter of a second of JSON.parse per MiB) is never parsed;
 *  - prototype pollution: `__proto__` keys, and `constructor` keys holding a
 *    `prototype`, are removed so later merges of params cannot reach Object.prototype.
 * The checks are skipped when the text cannot possibly trip them, which is
 * almost always, so ordinary messages pay only for JSON.parse.
 */

export type SafeParseResult =
  | { ok: true; value: unknown }
  | { ok: false; reason: 'syntax'; message: string }
  | { ok: false; reason: 'depth'; message: string }
  | { ok: false; reason: 'values'; message: string };

const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;
const QUOTE = 34;
const BACKSLASH = 92;
const COLON = 58;
const COMMA = 44;
/** Space and below: JSON's whitespace (and control characters, which no valid text has here). */
const SPACE = 32;

/**
 * Whether `text` holds more than `max` of `{` and `[` together, strings' included: found by
 * the engine's indexOf, a handful of calls for an ordinary message, instead of a loop over every
 * character (a tenth of the cost of the scan on a message of a few hundred characters).
 */
function moreOpenersThan(text: string, max: number): boolean {
  let opens = 0;
  for (let i = text.indexOf('{'); i !== -1; i = text.indexOf('{', i + 1)) {
    if (++opens > max) return true;
  }
  for (let i = text.indexOf('['); i !== -1; i = text.indexOf('[', i + 1)) {
    if (++opens > max) return true;
  }
  return false;
}

/** True when the JSON text nests objects/arrays deeper than `maxDepth`. */
export function exceedsDepth(text: string, maxDepth: number): boolean {
  // Each level needs an opening and a closing character, and an opening `{` or `[` of its own:
  // a text with no more of them than maxDepth (in strings or not) cannot nest deeper.
  if (text.length <= maxDepth * 2 || !moreOpenersThan(text, maxDepth)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * Whether a JSON text of `length` characters can hold more than `maxValues` values. A value
 * holding v values (itself included) takes at least 2v - 1 characters: a number or literal 1,
 * a string or an empty object or array 2; an array of k members its 2 brackets, its members
 * and k - 1 commas, so 2 + (2·Σv_i - k) + (k - 1) = 2(1 + Σv_i) - 1; an object more (each
 * member adds a key and a colon). So passing the cap (maxValues + 1 values) takes at least
 * 2 × maxValues + 1 characters, and a shorter text need not be scanned.
 */
export function mayExceedValues(length: number, maxValues: number): boolean {
  return length > maxValues * 2;
}

/**
 * One pass over the raw text: 'depth' when it nests deeper than `maxDepth`, 'values' when it
 * holds more than `maxValues` values, whichever it reaches first; undefined when neither.
 *
 * Values are counted by where they start: every `{`, `[` and string, and every run of other
 * characters outside strings (a number or literal), less one per colon, since each key is a
 * string followed by one. A key is counted just before its colon takes it back, and its member's
 * value comes right after: the count never passes the cap early on a valid text. Text that is
 * not JSON is counted all the same; it fails to parse when it is under the cap.
 */
export function scanJson(
  text: string,
  maxDepth: number,
  maxValues: number,
): 'depth' | 'values' | undefined {
  return walkJson(text, maxDepth, maxValues, undefined);
}

/**
 * How deep `text` nests and how many values it holds, counted as scanJson counts them (so
 * `values > maxValues` exactly when scanJson says 'values' for it, `depth > maxDepth` exactly
 * when exceedsDepth does): what a refusal naming either limit is checked against, once per text.
 */
export function jsonShape(text: string): { depth: number; values: number } {
  const shape = { depth: 0, values: 0 };
  walkJson(text, Infinity, Infinity, shape);
  return shape;
}

/** scanJson's pass; `shape`, when given, gets the deepest nesting and the most values reached. */
function walkJson(
  text: string,
  maxDepth: number,
  maxValues: number,
  shape: { depth: number; values: number } | undefined,
): 'depth' | 'values' | undefined {
  let depth = 0;
  let values = 0;
  let inString = false;
  let inToken = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) {
      inString = true;
      inToken = false;
      if (++values > maxValues) return 'values';
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      inToken = false;
      if (++depth > maxDepth) return 'depth';
      if (++values > maxValues) return 'values';
      if (shape && depth > shape.depth) shape.depth = depth;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      inToken = false;
      depth--;
    } else if (c === COLON) {
      inToken = false;
      // A key was counted as a value: the most values reached is taken before it is given back.
      if (shape && values > shape.values) shape.values = values;
      values--;
    } else if (c === COMMA || c <= SPACE) {
      inToken = false;
    } else if (!inToken) {
      inToken = true;
      if (++values > maxValues) return 'values';
    }
  }
  if (shape && values > shape.values) shape.values = values;
  return undefined;
}

/** What, if anything, refuses `text` before it is parsed; a scan only when one could. */
function refusalBeforeParse(
  text: string,
  maxDepth: number,
  maxValues: number,
): JsonRefusal | undefined {
  if (maxValues !== Infinity && mayExceedValues(text.length, maxValues)) {
    const reason = scanJson(text, maxDepth, maxValues);
    if (reason === 'values')
      return new JsonRefusal('values', `JSON holds more than ${maxValues} values`);
    if (reason === 'depth') return new JsonRefusal('depth', `JSON nests deeper than ${maxDepth}`);
    return undefined;
  }
  // The cap on values cannot be passed: the depth scan alone, which counts nothing.
  if (maxDepth !== Infinity && exceedsDepth(text, maxDepth)) {
    return new JsonRefusal('depth', `JSON nests deeper than ${maxDepth}`);
  }
  return undefined;
}

export function safeJsonParse(text: string, maxDepth = Infinity): SafeParseResult {
  const value = parseJson(text, maxDepth);
  if (value === NO_VALUE) return { ok: false, reason: 'syntax', message: syntaxMessage(text) };
  return value instanceof JsonRefusal
    ? { ok: false, reason: value.reason, message: value.message }
    : { ok: true, value };
}

/** The message of JSON.parse's SyntaxError on `text`. */
function syntaxMessage(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return (err as Error).message;
  }
  return '';
}

/** Why parseJson refused a text. An instance of it is never a value JSON.parse makes. */
export class JsonRefusal {
  constructor(
    readonly reason: 'syntax' | 'depth' | 'values',
    readonly message: string,
  ) {}
}

/**
 * A text whose first character after whitespace starts no JSON value, or that has none (empty,
 * blank): JSON.parse would throw on it. (Whitespace JSON does not allow is a syntax error
 * wherever it is, so skipping all of it, not JSON's four alone, finds no text JSON.parse reads;
 * the character after it is no whitespace either, so that backtracking finds nothing more.)
 */
const NOT_A_VALUE = /^\s*(?:$|[^\s"\-\d[{tfn])/;

/**
 * parseJson's refusal of a text NOT_A_VALUE finds, made without JSON.parse: its SyntaxError
 * costs a stack trace, several times what parsing a small message does. No message: the engine
 * answers -32700 without one, and safeJsonParse gives JSON.parse's own.
 */
const NO_VALUE = /* @__PURE__ */ new JsonRefusal('syntax', '');

/**
 * safeJsonParse with the value itself as its answer, or a JsonRefusal: no object around every
 * message's value (the parse of each frame goes through here).
 */
export function parseJson(text: string, maxDepth = Infinity, maxValues = Infinity): unknown {
  const refusal = refusalBeforeParse(text, maxDepth, maxValues);
  if (refusal !== undefined) return refusal;
  // A text starting `{` or `[` (every message) starts a value: only another one is looked at.
  const first = text.charCodeAt(0);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET && NOT_A_VALUE.test(text)) return NO_VALUE;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return new JsonRefusal('syntax', (err as Error).message);
  }
  // Both keys stripped need "proto" in the text: `__proto__` itself, and the `prototype` a
  // `constructor` must hold to be stripped. A key can also be spelled with \u escapes
  // ("\u005f_proto__"), which only JSON.parse decodes.
  if (text.includes('proto') || text.includes('\\u')) {
    stripDangerousKeys(value);
  }
  return value;
}

function stripDangerousKeys(value: unknown): void {
  // Iterative walk: the depth guard may be off, and recursion must not overflow.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    const record = node as Record<string, unknown>;
    if (Object.prototype.hasOwnProperty.call(record, '__proto__')) delete record['__proto__'];
    const ctor = Object.prototype.hasOwnProperty.call(record, 'constructor')
      ? record['constructor']
      : undefined;
    if (ctor !== null && typeof ctor === 'object' && 'prototype' in ctor) {
      delete record['constructor'];
    }
    for (const key of Object.keys(record)) stack.push(record[key]);
  }
}
