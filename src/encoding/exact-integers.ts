/*
 * 64-bit integers in MessagePack and CBOR, exact through the JSON text the engine speaks.
 *
 * Coming in, the codecs decode an integer a double cannot hold (MessagePack int64/uint64, CBOR
 * major types 0 and 1 with an 8-byte argument) as a BigInt; its decimal digits are written into
 * the JSON text, which is then the text a JSON client would have sent: an id is echoed byte for
 * byte (src/protocol/id-text.ts), any other such number reaches a handler as the nearest double.
 * Going out, a reply whose id is an integer beyond 2^53 has that id encoded from its digits as a
 * 64-bit integer again. Neither path runs unless such an integer is there: decoding looks at the
 * ids' types and otherwise tries plain JSON.stringify (which throws on a BigInt elsewhere), and
 * encoding looks at the parsed ids' numbers.
 */
import { scanIdTexts } from '../protocol/id-text.js';
import type { WireCodec } from './codec.js';

/** The JSON text of a decoded value holding BigInts, each written as its digits. */
export function jsonWithBigInts(value: unknown): string | undefined {
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'object': {
      if (value === null) return 'null';
      // As JSON.stringify: undefined is null in an array and leaves its key out of an object.
      if (Array.isArray(value)) {
        const items: string[] = [];
        for (let i = 0; i < value.length; i++) items.push(jsonWithBigInts(value[i]) ?? 'null');
        return `[${items.join(',')}]`;
      }
      const members: string[] = [];
      for (const key of Object.keys(value)) {
        const text = jsonWithBigInts((value as Record<string, unknown>)[key]);
        if (text !== undefined) members.push(`${JSON.stringify(key)}:${text}`);
      }
      return `{${members.join(',')}}`;
    }
    default:
      // Strings, numbers (NaN and the infinities as null), booleans; undefined stays undefined.
      return JSON.stringify(value) as string | undefined;
  }
}

/** Whether a decoded message, or a member of a decoded batch, has a BigInt id. */
export function hasBigIntId(value: unknown): boolean {
  if (Array.isArray(value)) {
    for (const member of value) if (hasBigIntId(member)) return true;
    return false;
  }
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { id?: unknown }).id === 'bigint'
  );
}

/** A number a double holds only approximately when it is an integer: the id needs its digits. */
function wideInteger(id: unknown): boolean {
  return typeof id === 'number' && !Number.isSafeInteger(id) && Number.isInteger(id);
}

/** Whether a parsed message, or a member of a parsed batch, has an id beyond 2^53. */
export function hasWideId(value: unknown): boolean {
  if (Array.isArray(value)) {
    for (const member of value) if (hasWideId(member)) return true;
    return false;
  }
  return value !== null && typeof value === 'object' && wideInteger((value as { id?: unknown }).id);
}

const MAX_UINT64 = (1n << 64n) - 1n;
/**
 * The most negative integer each codec writes as a plain integer: int64's; for CBOR, one above
 * -2^64, which cbor-x writes as a bignum tag (a tag every check here refuses).
 */
const MIN_INTEGER: Readonly<Record<WireCodec['name'], bigint>> = {
  msgpack: -(1n << 63n),
  cbor: -(1n << 64n) + 1n,
};

/** The digits of an integer id as the codec's 64-bit integer, when it holds one. */
function exactInteger(codec: WireCodec, text: string | undefined): bigint | undefined {
  if (text === undefined || !/^-?\d+$/.test(text)) return undefined;
  const integer = BigInt(text);
  return integer >= MIN_INTEGER[codec.name] && integer <= MAX_UINT64 ? integer : undefined;
}

/**
 * `value` (parsed from `text`) with each id beyond 2^53 replaced by the BigInt its digits in
 * `text` write, when the codec holds it as a 64-bit integer; otherwise it stays the double.
 */
export function withExactIds(codec: WireCodec, text: string, value: unknown): unknown {
  const batch = Array.isArray(value);
  const texts = scanIdTexts(text, batch);
  const exact = (message: unknown, index: number): unknown => {
    const id = (message as { id?: unknown } | null)?.id;
    if (!wideInteger(id)) return message;
    const integer = exactInteger(codec, texts[index]);
    return integer === undefined ? message : { ...(message as object), id: integer };
  };
  return batch ? (value as unknown[]).map(exact) : exact(value, 0);
}
