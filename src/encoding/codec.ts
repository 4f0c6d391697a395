import { hasBigIntId, hasWideId, jsonWithBigInts, withExactIds } from './exact-integers.js';

/** What a codec's structure walk found: well-formed, or why it refuses the bytes. */
export type CheckResult = 'ok' | 'syntax' | 'depth' | 'values';

/**
 * A binary encoding of JSON-RPC messages (MessagePack, CBOR), negotiated per WebSocket
 * connection by subprotocol. The engine speaks JSON text: a transport with a codec turns each
 * incoming binary frame into that text and each outgoing text into one binary frame, so every
 * limit (maxMessageBytes on the frame, maxDepth, maxJsonValues, maxBatch) applies as it does to
 * JSON; maxDepth and maxJsonValues are measured on the bytes, before they are decoded.
 */
export interface WireCodec {
  /** The encoding's name in the gateway's `encodings` option and the client's `encoding`. */
  readonly name: 'msgpack' | 'cbor';
  /** The subprotocol that selects it: `jsonrpc-2.0+<name>`. */
  readonly subprotocol: string;
  /** One JSON value (a message or a batch) as bytes. */
  readonly encode: (value: unknown) => Uint8Array;
  /**
   * The value of bytes that passed `check`; throws on anything it cannot read. An integer a
   * double cannot hold is a BigInt (see exact-integers.ts).
   */
  readonly decode: (bytes: Uint8Array) => unknown;
  /**
   * Walk the encoded structure without building it: 'depth' when arrays and maps nest deeper
   * than `maxDepth`, 'values' when it holds more than `maxValues` values (counted as JSON text
   * is: each array, map and scalar one, map keys none; default Infinity), 'syntax' for a
   * truncated or malformed value, trailing bytes, a length larger than the bytes left, or a
   * type outside JSON's (binary strings, extensions, tags). Bounded: no recursion, no
   * allocation per item.
   */
  readonly check: (bytes: Uint8Array, maxDepth: number, maxValues?: number) => CheckResult;
  /**
   * One incoming frame as the JSON text the engine reads (`binaryToText` with this codec). The
   * codec carries its own conversions (`withTextFrames`) so that a client speaking JSON alone,
   * whose transport reaches them only through the codec, does not bundle them.
   */
  readonly toText: (bytes: Uint8Array, maxDepth: number, maxValues?: number) => string;
  /** One outgoing JSON text as the codec's bytes (`textToBinary` with this codec). */
  readonly toBinary: (text: string) => Uint8Array;
}

/** The subprotocol of plain JSON text frames. */
export const JSON_SUBPROTOCOL = 'jsonrpc-2.0';

/** Encodings a gateway can enable; JSON is always on. */
export type EncodingName = 'json' | WireCodec['name'];

export const ENCODING_NAMES: readonly EncodingName[] = ['json', 'msgpack', 'cbor'];

export function subprotocolOf(name: EncodingName): string {
  return name === 'json' ? JSON_SUBPROTOCOL : `${JSON_SUBPROTOCOL}+${name}`;
}

/**
 * Text no JSON parser reads: the engine answers it -32700 Parse error, id null, refused before
 * JSON.parse is called (it starts no JSON value: safe-json's NOT_A_VALUE).
 */
const PARSE_ERROR_TEXT = '\u0000';

/**
 * Text nested one level deeper than `maxDepth`: the engine answers it as it answers JSON that
 * is too deep (-32600, `data: { maxDepth }`, id null), without the value ever being built.
 */
function tooDeepText(maxDepth: number): string {
  const levels = Math.min(maxDepth, 1_000_000) + 1;
  return '['.repeat(levels) + ']'.repeat(levels);
}

/**
 * Text holding one value more than `maxValues` (`""` repeated: two characters a value, the
 * fewest JSON text can take, so the engine's scan counts it in full): the engine answers it as
 * it answers JSON of too many values (-32600, `data: { maxJsonValues }`, id null), without the
 * frame ever being decoded. The walk refuses only a frame of more than `maxValues` values,
 * each of a byte at least: the text is at most twice the frame's length.
 */
function tooManyValuesText(maxValues: number): string {
  if (lastValuesText?.maxValues !== maxValues) {
    lastValuesText = { maxValues, text: '""'.repeat(maxValues + 1) };
  }
  return lastValuesText.text;
}

/** A gateway has one cap on values: its refusal text is made once, not for every frame. */
let lastValuesText: { maxValues: number; text: string } | undefined;

/** A codec of a gateway's (withValueCap): the cap on values it reads frames with by default. */
interface CappedCodec extends WireCodec {
  readonly maxValues: number;
}

function valueCapOf(codec: WireCodec): number {
  return (codec as Partial<CappedCodec>).maxValues ?? Infinity;
}

/**
 * The JSON text of one binary frame, or text the engine answers with the precise error.
 * `maxValues`: the most values it may hold (the gateway's limits.maxJsonValues); by default the
 * codec's own cap (withValueCap), else none.
 */
export function binaryToText(
  codec: WireCodec,
  bytes: Uint8Array,
  maxDepth: number,
  maxValues = valueCapOf(codec),
): string {
  const checked = codec.check(bytes, maxDepth, maxValues);
  if (checked === 'depth') return tooDeepText(maxDepth);
  if (checked === 'values') return tooManyValuesText(maxValues);
  if (checked === 'syntax') return PARSE_ERROR_TEXT;
  let value: unknown;
  try {
    value = codec.decode(bytes);
  } catch {
    return PARSE_ERROR_TEXT;
  }
  try {
    // A 64-bit id is a BigInt, on which JSON.stringify would throw (costly): go straight to
    // writing its digits.
    return (
      (hasBigIntId(value) ? jsonWithBigInts(value) : JSON.stringify(value)) ?? PARSE_ERROR_TEXT
    );
  } catch {
    // JSON.stringify threw on a BigInt elsewhere (a 64-bit integer in params): write its digits.
    try {
      return jsonWithBigInts(value) ?? PARSE_ERROR_TEXT;
    } catch {
      return PARSE_ERROR_TEXT;
    }
  }
}

/**
 * One outgoing JSON text (always valid: the engine wrote it) as the codec's bytes; an id
 * beyond 2^53 goes as the 64-bit integer its digits write, as it came.
 */
export function textToBinary(codec: WireCodec, text: string): Uint8Array {
  const value: unknown = JSON.parse(text);
  return codec.encode(hasWideId(value) ? withExactIds(codec, text, value) : value);
}

const decoder = /* @__PURE__ */ new TextDecoder();

/** A fan-out frame's UTF-8 JSON bytes as the codec's bytes. */
export function jsonBytesToBinary(codec: WireCodec, bytes: Uint8Array): Uint8Array {
  return codec.encode(JSON.parse(decoder.decode(bytes)));
}

/** `codec` with its conversions between frames and JSON text (`toText`, `toBinary`) added. */
export function withTextFrames(codec: Omit<WireCodec, 'toText' | 'toBinary'>): WireCodec {
  // The conversions read the returned object, so a codec whose encode is replaced (tests) is seen.
  const framed: WireCodec = {
    ...codec,
    toText: (bytes, maxDepth, maxValues) => binaryToText(framed, bytes, maxDepth, maxValues),
    toBinary: (text) => textToBinary(framed, text),
  };
  return framed;
}

/**
 * `codec` reading every frame with at most `maxValues` values unless told otherwise (a
 * gateway's limits.maxJsonValues): its `check`, its `toText`, and `binaryToText` given it.
 * Everything else is the codec's own, read from it at each use (a replaced encode is seen). One
 * per gateway and codec, shared by its connections: the fan-out frames are built per codec.
 */
export function withValueCap(codec: WireCodec, maxValues: number): WireCodec {
  const capped: CappedCodec = {
    name: codec.name,
    subprotocol: codec.subprotocol,
    maxValues,
    encode: (value) => codec.encode(value),
    decode: (bytes) => codec.decode(bytes),
    check: (bytes, maxDepth, values = maxValues) => codec.check(bytes, maxDepth, values),
    toText: (bytes, maxDepth, values = maxValues) => binaryToText(capped, bytes, maxDepth, values),
    toBinary: (text) => textToBinary(capped, text),
  };
  return capped;
}
