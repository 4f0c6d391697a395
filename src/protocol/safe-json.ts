/**
 * JSON.parse plus two guards a server facing the internet needs:
 *  - nesting depth, checked on the raw text before parsing so a hostile
 *    `[[[[...` never reaches the recursive parser;
 *  - prototype pollution: `__proto__` keys, and `constructor` keys holding a
 *    `prototype`, are removed so later merges of params cannot reach Object.prototype.
 * Both checks are skipped when the text cannot possibly trip them, which is
 * almost always, so ordinary messages pay only for JSON.parse.
 */

export type SafeParseResult =
  | { ok: true; value: unknown }
  | { ok: false; reason: 'syntax'; message: string }
  | { ok: false; reason: 'depth'; message: string };

const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;
const QUOTE = 34;
const BACKSLASH = 92;

/** True when the JSON text nests objects/arrays deeper than `maxDepth`. */
export function exceedsDepth(text: string, maxDepth: number): boolean {
  // Each level needs an opening and a closing character.
  if (text.length <= maxDepth * 2) return false;
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

export function safeJsonParse(text: string, maxDepth = Infinity): SafeParseResult {
  const value = parseJson(text, maxDepth);
  return value instanceof JsonRefusal
    ? { ok: false, reason: value.reason, message: value.message }
    : { ok: true, value };
}

/** Why parseJson refused a text. An instance of it is never a value JSON.parse makes. */
export class JsonRefusal {
  constructor(
    readonly reason: 'syntax' | 'depth',
    readonly message: string,
  ) {}
}

/**
 * safeJsonParse with the value itself as its answer, or a JsonRefusal: no object around every
 * message's value (the parse of each frame goes through here).
 */
export function parseJson(text: string, maxDepth = Infinity): unknown {
  if (maxDepth !== Infinity && exceedsDepth(text, maxDepth)) {
    return new JsonRefusal('depth', `JSON nests deeper than ${maxDepth}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return new JsonRefusal('syntax', (err as Error).message);
  }
  // A key can also be spelled with \u escapes ("\u005f_proto__"), which only JSON.parse decodes.
  if (text.includes('__proto__') || text.includes('constructor') || text.includes('\\u')) {
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
