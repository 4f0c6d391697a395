import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  isWhitespace,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  stringEnd,
} from '../protocol/json-members.js';
import type { WireCodec } from './codec.js';

/** `__proto__` in UTF-8. */
const PROTO = [0x5f, 0x5f, 0x70, 0x72, 0x6f, 0x74, 0x6f, 0x5f, 0x5f];

/** Whether the string at `bytes[start, start + length)` is `__proto__`. */
export function isProtoKey(bytes: Uint8Array, start: number, length: number): boolean {
  if (length !== PROTO.length) return false;
  for (let i = 0; i < length; i++) if (bytes[start + i] !== PROTO[i]) return false;
  return true;
}

/**
 * The value of `bytes`, whose map keys at `offsets` are `__proto__`, with those keys kept as
 * own `__proto__` properties: msgpackr and cbor-x rename such a key `__proto_`, which JSON text
 * would carry to the handler, where a JSON frame has its `__proto__` keys stripped (safe-json.ts
 * parseJson). Kept, the key reaches the engine's JSON text as `__proto__` and is stripped there,
 * exactly as in JSON. A copy of the frame has those keys overwritten with a marker found nowhere
 * in it, of the same length; the decoded marker keys are turned back.
 */
export function decodeKeepingProtoKeys(
  codec: WireCodec,
  bytes: Uint8Array,
  offsets: readonly number[],
): unknown {
  const marker = markerAbsentFrom(bytes);
  // A copy of its own: a Buffer's slice() is a view, which would overwrite the caller's bytes.
  const copy = new Uint8Array(bytes);
  for (const offset of offsets) copy.set(marker, offset);
  const value = codec.decode(copy);
  return withProtoKeys(value, String.fromCharCode(...marker));
}

/** Nine ASCII letters found nowhere in `bytes`: random, so no frame can be made to hold it. */
function markerAbsentFrom(bytes: Uint8Array): Uint8Array {
  const marker = new Uint8Array(PROTO.length);
  for (;;) {
    for (let i = 0; i < marker.length; i++) marker[i] = 0x61 + Math.floor(Math.random() * 26);
    if (!holds(bytes, marker)) return marker;
  }
}

function holds(bytes: Uint8Array, part: Uint8Array): boolean {
  for (let at = bytes.indexOf(part[0]!); at !== -1; at = bytes.indexOf(part[0]!, at + 1)) {
    let i = 1;
    while (i < part.length && bytes[at + i] === part[i]) i++;
    if (i === part.length) return true;
  }
  return false;
}

/** `value` with every `marker` key of its maps made an own `__proto__` key, in place. */
function withProtoKeys(value: unknown, marker: string): unknown {
  // Iterative: the walk has bounded the depth, but recursion is not needed.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    const record = node as Record<string, unknown>;
    if (Object.prototype.hasOwnProperty.call(record, marker)) {
      // Rebuilt in order, as JSON.parse would have made it; defineProperty makes an own key
      // where assignment would set the prototype.
      const entries = Object.entries(record);
      for (const [key] of entries) delete record[key];
      for (const [key, item] of entries) {
        Object.defineProperty(record, key === marker ? '__proto__' : key, {
          value: item,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
    for (const key of Object.keys(record)) stack.push(record[key]);
  }
  return value;
}

/**
 * Whether the JSON text may hold a key parseJson strips (safe-json.ts): the test it makes itself,
 * `proto` for both keys it strips, `\u` for a key spelled with escapes.
 */
export function mayHoldStrippedKeys(text: string): boolean {
  return text.includes('proto') || text.includes('\\u');
}

/**
 * `text` (one JSON value, valid: JSON.parse took it, and nested no deeper than a parse bounded
 * it to: the walk recurses) without the members parseJson strips from the value it makes
 * (safe-json.ts, stripDangerousKeys): every `__proto__` member, and every `constructor` member
 * of an object whose last `constructor` (the one JSON.parse keeps) holds a `prototype`, at any
 * depth, keys spelled with `\u` escapes included. So JSON.parse of the answer is the value
 * parseJson makes of `text`, and the rest of the text is as written, numbers included (what a
 * double does not hold exactly stays as it was). An object that loses a member is written again
 * from its other members' texts, joined by commas, without the whitespace between them.
 */
export function withoutStrippedMembers(text: string): string {
  const start = skipWhitespace(text, 0);
  const piece = valueAt(text, start);
  return piece.text === undefined
    ? text
    : text.slice(0, start) + piece.text + text.slice(piece.end);
}

/** A value's text: where it ends, and its text without stripped members (undefined: unchanged). */
interface Piece {
  readonly end: number;
  readonly text: string | undefined;
  /** An object with a `prototype` member: a `constructor` holding it is stripped. */
  readonly holdsPrototype?: boolean;
}

function skipWhitespace(text: string, i: number): number {
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++;
  return i;
}

function valueAt(text: string, i: number): Piece {
  const c = text.charCodeAt(i);
  if (c === OPEN_BRACE) return objectAt(text, i);
  if (c === OPEN_BRACKET) return arrayAt(text, i);
  if (c === QUOTE) return { end: stringEnd(text, i) + 1, text: undefined };
  // A number, true, false or null: up to what ends a value.
  let end = i + 1;
  for (; end < text.length; end++) {
    const d = text.charCodeAt(end);
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isWhitespace(d)) break;
  }
  return { end, text: undefined };
}

/** `text[start, end)` with each edit's span replaced by its text. */
function edited(text: string, start: number, end: number, edits: readonly Edit[]): string {
  let out = '';
  let at = start;
  for (const edit of edits) {
    out += text.slice(at, edit.start) + edit.text;
    at = edit.end;
  }
  return out + text.slice(at, end);
}

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

function arrayAt(text: string, open: number): Piece {
  const edits: Edit[] = [];
  let i = skipWhitespace(text, open + 1);
  if (text.charCodeAt(i) !== CLOSE_BRACKET) {
    for (;;) {
      const item = valueAt(text, i);
      if (item.text !== undefined) edits.push({ start: i, end: item.end, text: item.text });
      i = skipWhitespace(text, item.end);
      if (text.charCodeAt(i) !== COMMA) break;
      i = skipWhitespace(text, i + 1);
    }
  }
  const end = i + 1;
  return { end, text: edits.length === 0 ? undefined : edited(text, open, end, edits) };
}

interface Member {
  readonly keyStart: number;
  readonly valueStart: number;
  readonly value: Piece;
  readonly key: StrippedKey | undefined;
}

type StrippedKey = '__proto__' | 'constructor' | 'prototype';

/** The key of the string token `text[open..close]` when it is one the strip looks at. */
function keyOf(text: string, open: number, close: number): StrippedKey | undefined {
  const length = close - open - 1;
  // Escapes take at most six characters a character: a longer token names none of them.
  if (length < '__proto__'.length || length > 6 * 'constructor'.length) return undefined;
  const token = text.slice(open, close + 1);
  const key = token.includes('\\') ? (JSON.parse(token) as string) : token.slice(1, -1);
  return key === '__proto__' || key === 'constructor' || key === 'prototype' ? key : undefined;
}

function objectAt(text: string, open: number): Piece {
  const members: Member[] = [];
  let i = skipWhitespace(text, open + 1);
  if (text.charCodeAt(i) !== CLOSE_BRACE) {
    for (;;) {
      const close = stringEnd(text, i);
      const key = keyOf(text, i, close);
      let at = skipWhitespace(text, close + 1);
      if (text.charCodeAt(at) === COLON) at = skipWhitespace(text, at + 1);
      const value = valueAt(text, at);
      members.push({ keyStart: i, valueStart: at, value, key });
      i = skipWhitespace(text, value.end);
      if (text.charCodeAt(i) !== COMMA) break;
      i = skipWhitespace(text, i + 1);
    }
  }
  const end = i + 1;
  const holdsPrototype = members.some((member) => member.key === 'prototype');
  // JSON.parse keeps the last of duplicate members: the strip looks at that one.
  let stripsConstructor = false;
  for (const member of members) {
    if (member.key === 'constructor') stripsConstructor = member.value.holdsPrototype === true;
  }
  const kept = members.filter(
    (member) => member.key !== '__proto__' && !(member.key === 'constructor' && stripsConstructor),
  );
  if (kept.length < members.length) {
    const texts = kept.map(
      (member) =>
        text.slice(member.keyStart, member.valueStart) +
        (member.value.text ?? text.slice(member.valueStart, member.value.end)),
    );
    return { end, text: `{${texts.join(',')}}`, holdsPrototype };
  }
  const edits: Edit[] = [];
  for (const member of members) {
    const changed = member.value.text;
    if (changed !== undefined) {
      edits.push({ start: member.valueStart, end: member.value.end, text: changed });
    }
  }
  return {
    end,
    text: edits.length === 0 ? undefined : edited(text, open, end, edits),
    holdsPrototype,
  };
}
