/**
 * What a JSON-RPC 2.0 server that follows the specification exactly answers to a frame: for
 * requests, notifications, batches, invalid ids and versions, parse errors, empty and
 * over-long batches, and the frames over a size or nesting limit. It is the oracle that the
 * classifier, the peer and the live gateway are checked against, so it is written from the
 * specification alone and imports nothing from src/.
 *
 * A frame goes through `analyseFrame` (or `analyseText`), then `expectedUnit` says which reply
 * it is due: none, one Response, or one batch array. What a request's method answers is the
 * test's `Service`.
 */

export type Id = string | number | null;
export type Json = unknown;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function own(value: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(value, key);
}

/**
 * Spec 4: an id is a String, a Number or Null. Any JSON number: one beyond the range of a
 * double (1e400) reads as an infinity here, and a server echoes its text as sent.
 */
export function isValidId(value: unknown): value is Id {
  return value === null || typeof value === 'string' || typeof value === 'number';
}

/** What safe parsing leaves of a parsed value: no own `__proto__`, no `constructor` with a `prototype`. */
export function stripped(value: Json): Json {
  if (Array.isArray(value)) return value.map(stripped);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (key === '__proto__') continue;
    const v = value[key];
    if (key === 'constructor' && isPlainObject(v) && own(v, 'prototype')) continue;
    Object.defineProperty(out, key, {
      value: stripped(v),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** The value as it comes back through JSON (-0 becomes 0, undefined becomes null). */
export function roundTrip(value: Json): Json {
  return JSON.parse(JSON.stringify(value === undefined ? null : value)) as Json;
}

/** Equality of JSON values, own keys only (so a `__proto__` key compares as a key). */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  return ka.every((k) => own(rb, k) && jsonEqual(ra[k], rb[k]));
}

// ---------------------------------------------------------------------------
// One message
// ---------------------------------------------------------------------------

export type Classified =
  | { kind: 'invalid'; id: Id }
  /** A response (result or error, no method): there is no one to answer. */
  | { kind: 'ignored' }
  | { kind: 'notification'; method: string; params: Json }
  | { kind: 'request'; id: Id; method: string; params: Json };

/**
 * Spec 4 and 5.1: what one message is. An invalid one is answered -32600 with its id when that
 * id is valid, else null; `params`, when present, must be an array or an object.
 */
export function classifyMember(m: Json): Classified {
  if (!isPlainObject(m)) return { kind: 'invalid', id: null };
  const hasId = own(m, 'id');
  const id = m['id'];
  const idIfValid = hasId && isValidId(id) ? id : null;
  if (!own(m, 'jsonrpc') || m['jsonrpc'] !== '2.0') {
    if (!own(m, 'method') && (own(m, 'result') || own(m, 'error'))) return { kind: 'ignored' };
    return { kind: 'invalid', id: idIfValid };
  }
  if (own(m, 'method')) {
    const method = m['method'];
    if (typeof method !== 'string') return { kind: 'invalid', id: idIfValid };
    if (hasId && !isValidId(id)) return { kind: 'invalid', id: null };
    const params = m['params'];
    if (own(m, 'params') && (params === null || typeof params !== 'object')) {
      return { kind: 'invalid', id: idIfValid };
    }
    if (!hasId) return { kind: 'notification', method, params };
    return { kind: 'request', id: id as Id, method, params };
  }
  if (own(m, 'result') || own(m, 'error')) return { kind: 'ignored' };
  return { kind: 'invalid', id: idIfValid };
}

// ---------------------------------------------------------------------------
// One frame
// ---------------------------------------------------------------------------

/** The server's limits; an absent one is no limit. */
export interface FrameLimits {
  /** Larger frames close the WebSocket with 1009. */
  maxBytes?: number;
  /** Deeper values are Invalid Request (checked on the raw text, before parsing). */
  maxDepth?: number;
  /** Longer batches are answered with one -32002 error. */
  maxBatch?: number;
  /**
   * Frames holding more values (objects, arrays, strings, numbers, literals; keys not counted)
   * are Invalid Request, counted on the raw text before parsing.
   */
  maxJsonValues?: number;
  /**
   * A binary frame (JSON travels in text frames): 'refuse' (when absent) closes the WebSocket
   * with 1003 Unsupported Data; 'text' reads it as UTF-8, invalid sequences as U+FFFD.
   */
  binaryFrames?: 'refuse' | 'text';
}

/** A frame as the server sees it: a close, errors owed before any member runs, or a value. */
export type Analysed = { close: number } | { errors: number[] } | { value: Json };

/**
 * One WebSocket message's bytes: size first, then the frame type (binary) or UTF-8 (text),
 * then its text (a binary frame read as text must be UTF-8 as a text frame must).
 */
export function analyseFrame(bytes: Uint8Array, binary: boolean, limits: FrameLimits): Analysed {
  if (limits.maxBytes !== undefined && bytes.length > limits.maxBytes) return { close: 1009 };
  if (binary && limits.binaryFrames !== 'text') return { close: 1003 };
  if (!isValidUtf8(bytes)) return { close: 1007 };
  return analyseText(
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8'),
    limits,
  );
}

/** One frame's text: a parse error, too deep, or the value safe parsing yields. */
export function analyseText(text: string, limits: FrameLimits = {}): Analysed {
  const maxDepth = limits.maxDepth ?? Infinity;
  const maxValues = limits.maxJsonValues ?? Infinity;
  let value: Json;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: a parse error, or Invalid Request when the raw text already nests too deeply or
    // may hold too many values (a text of n characters can hold more than maxValues only when
    // n > 2 x maxValues): both are checked before parsing, so either may come first.
    const refusable = rawDepth(text) > maxDepth || text.length > 2 * maxValues;
    return { errors: refusable ? [-32700, -32600] : [-32700] };
  }
  if (valueDepth(value) > maxDepth || valueCount(value) > maxValues) return { errors: [-32600] };
  return { value: stripped(value) };
}

/** The members a frame's value carries, as the server runs them (none for refused batches). */
export function members(value: Json, limits: FrameLimits = {}): Json[] {
  if (!Array.isArray(value)) return [value];
  if (value.length === 0 || value.length > (limits.maxBatch ?? Infinity)) return [];
  return value;
}

/** What a request may be answered: one of these outcomes. */
export type Outcome = { result: Json } | { code: number };

/** The reply one member is due: its id, and the outcomes any one of which is right. */
export interface MemberExpect {
  id: Id;
  outcomes: Outcome[];
}

/** The reply one frame is due: a single Response, or a batch array (in any order, spec 6). */
export type Unit =
  { batch: false; member: MemberExpect } | { batch: true; members: MemberExpect[] };

/** What the methods the test registered answer to a request (params undefined when absent). */
export type Service = (request: { method: string; params: Json; id: Id }) => Outcome[];

/** The reply a member is due, or undefined (notifications, responses). */
export function memberExpect(m: Json, service: Service): MemberExpect | undefined {
  const c = classifyMember(m);
  switch (c.kind) {
    case 'invalid':
      return { id: c.id, outcomes: [{ code: -32600 }] };
    case 'ignored':
    case 'notification':
      return undefined;
    case 'request':
      return { id: c.id, outcomes: service(c) };
  }
}

/** The reply an analysed frame is due, or undefined when it gets none. */
export function expectedUnit(
  a: Analysed,
  service: Service,
  limits: FrameLimits = {},
): Unit | undefined {
  if ('close' in a) return undefined;
  if ('errors' in a) {
    return { batch: false, member: { id: null, outcomes: a.errors.map((code) => ({ code })) } };
  }
  const value = a.value;
  if (!Array.isArray(value)) {
    const member = memberExpect(value, service);
    return member && { batch: false, member };
  }
  // Spec 6: an empty array is one Invalid Request.
  if (value.length === 0) {
    return { batch: false, member: { id: null, outcomes: [{ code: -32600 }] } };
  }
  if (value.length > (limits.maxBatch ?? Infinity)) {
    return { batch: false, member: { id: null, outcomes: [{ code: -32002 }] } };
  }
  const expected = value
    .map((m) => memberExpect(m, service))
    .filter((m): m is MemberExpect => m !== undefined);
  // Spec 6: a batch of notifications only gets nothing back.
  return expected.length > 0 ? { batch: true, members: expected } : undefined;
}

// ---------------------------------------------------------------------------
// Checking replies
// ---------------------------------------------------------------------------

const RESPONSE_KEYS = new Set(['jsonrpc', 'result', 'error', 'id']);
const ERROR_KEYS = new Set(['code', 'message', 'data']);

/** Spec 5 / 5.1: what is wrong with the shape of one Response object, or undefined. */
export function responseProblem(r: unknown): string | undefined {
  if (!isPlainObject(r)) return 'a reply member is not an object';
  for (const key of Object.keys(r)) {
    if (!RESPONSE_KEYS.has(key)) return `a response has the member "${key}"`;
  }
  if (r['jsonrpc'] !== '2.0') return 'jsonrpc is not "2.0"';
  if (!own(r, 'id') || !isValidId(r['id'])) return 'missing or invalid id';
  if (own(r, 'result') === own(r, 'error')) return 'not exactly one of result and error';
  if (own(r, 'error')) {
    const e = r['error'];
    if (!isPlainObject(e)) return 'error is not an object';
    for (const key of Object.keys(e)) {
      if (!ERROR_KEYS.has(key)) return `an error has the member "${key}"`;
    }
    if (!Number.isInteger(e['code'])) return 'error.code is not an integer';
    if (typeof e['message'] !== 'string') return 'error.message is not a string';
  }
  return undefined;
}

/** What is wrong with a reply frame's value (a Response or a non-empty array of them), or undefined. */
export function replyProblem(value: unknown): string | undefined {
  if (!Array.isArray(value)) return responseProblem(value);
  if (value.length === 0) return 'an empty array reply';
  for (const item of value) {
    const problem = responseProblem(item);
    if (problem) return problem;
  }
  return undefined;
}

/** One Response answers `m`: the same id (`===`: 0 and -0 are one JSON number) and a right outcome. */
export function memberMatches(r: unknown, m: MemberExpect): boolean {
  if (!isPlainObject(r) || r['id'] !== m.id) return false;
  return m.outcomes.some((o) =>
    'result' in o
      ? own(r, 'result') && jsonEqual(r['result'], o.result)
      : own(r, 'error') && (r['error'] as { code: unknown }).code === o.code,
  );
}

/** A reply frame's value answers `unit`; batch responses may come in any order (spec 6). */
export function unitMatches(value: unknown, unit: Unit): boolean {
  if (!unit.batch) return !Array.isArray(value) && memberMatches(value, unit.member);
  if (!Array.isArray(value) || value.length !== unit.members.length) return false;
  return perfectMatching(value.length, (i, j) => memberMatches(value[i], unit.members[j]!));
}

/** Kuhn's algorithm: can every left item i be paired with a distinct right item j that fits? */
export function perfectMatching(n: number, fits: (i: number, j: number) => boolean): boolean {
  const table = Array.from({ length: n }, (_, i) =>
    Array.from({ length: n }, (_, j) => fits(i, j)),
  );
  const owner = new Array<number>(n).fill(-1);
  const assign = (i: number, seen: boolean[]): boolean => {
    for (let j = 0; j < n; j++) {
      if (seen[j] || !table[i]![j]) continue;
      seen[j] = true;
      if (owner[j] === -1 || assign(owner[j]!, seen)) {
        owner[j] = i;
        return true;
      }
    }
    return false;
  };
  for (let i = 0; i < n; i++) if (!assign(i, new Array<boolean>(n).fill(false))) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Text measures
// ---------------------------------------------------------------------------

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

function isValidUtf8(bytes: Uint8Array): boolean {
  try {
    fatalUtf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Nesting of the raw text, brackets inside strings excluded (for text that is not JSON). */
function rawDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') max = Math.max(max, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return max;
}

/** Values in a parsed value, itself included, object keys not counted (iterative). */
function valueCount(value: Json): number {
  let count = 0;
  const stack: Json[] = [value];
  while (stack.length > 0) {
    const node = stack.pop()!;
    count++;
    if (node !== null && typeof node === 'object') stack.push(...Object.values(node));
  }
  return count;
}

/** Nesting of a parsed value (iterative: generated values nest 20 000 deep). */
function valueDepth(value: Json): number {
  let deepest = 0;
  const stack: [Json, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}
