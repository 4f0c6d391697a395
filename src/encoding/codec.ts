import { ErrorCode } from '../protocol/error-codes.js';
import { exceedsDepth } from '../protocol/safe-json.js';
import { MAX_MESSAGE_DEPTH } from './encoded-depth.js';
import { decodeKeepingProtoKeys } from './proto-keys.js';
import { hasBigIntId, hasWideId, jsonWithBigInts, withExactIds } from './exact-integers.js';
import {
  holdsLoneSurrogate,
  loneSurrogateReason,
  mayHoldLoneSurrogate,
} from './lone-surrogates.js';
import {
  holdsNonFiniteNumber,
  jsonHoldsOverflowingNumber,
  overflowingNumberReason,
} from './non-finite.js';

/**
 * What a codec's structure walk found: well-formed, or why it refuses the bytes ('utf8': a
 * string whose bytes are not well-formed UTF-8).
 */
export type CheckResult = 'ok' | 'syntax' | 'depth' | 'values' | 'utf8';

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
   * truncated or malformed value, trailing bytes, a length larger than the bytes left, a type
   * outside JSON's (binary strings, extensions, tags) or a map key that is not a string, 'utf8'
   * for a string that is not well-formed UTF-8 (a decoder would read U+FFFD in its place).
   * Bounded: no recursion, no allocation per item.
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
 * A codec's check (checkMsgpack, checkCbor) also listing the offsets of the map keys
 * `__proto__`, which the decoders rename (see proto-keys.ts). A check that does not list them
 * leaves the list empty.
 */
type CheckFindingProtoKeys = (
  bytes: Uint8Array,
  maxDepth: number,
  maxValues: number,
  protoKeys: number[],
) => CheckResult;

/** The offsets of one frame's `__proto__` keys: reused, frames are read one at a time. */
const protoKeys: number[] = [];

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
  protoKeys.length = 0;
  const checked = (codec.check as CheckFindingProtoKeys)(bytes, maxDepth, maxValues, protoKeys);
  if (checked === 'depth') return tooDeepText(maxDepth);
  if (checked === 'values') return tooManyValuesText(maxValues);
  // A string that is not UTF-8 is no JSON string: refused as JSON text with such bytes is.
  if (checked === 'syntax' || checked === 'utf8') return PARSE_ERROR_TEXT;
  let value: unknown;
  try {
    value =
      protoKeys.length === 0
        ? codec.decode(bytes)
        : decodeKeepingProtoKeys(codec, bytes, protoKeys);
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
 * Never throws an encoder's error: a response the codec cannot encode (nested deeper than
 * MAX_MESSAGE_DEPTH, which would overflow the stack of msgpackr's or cbor-x's recursive encoder,
 * holding a string with a lone surrogate, which no UTF-8 string can carry, or a number beyond a
 * double's range, passed on as written, which the encoder would write as an infinite float no
 * check reads) goes as a -32603 Internal error with
 * `data: { reason }` for its id; a text with a request or notification it cannot encode is not
 * sent at all: an UnencodableMessageError says why, and what answers the text's calls.
 */
export function textToBinary(codec: WireCodec, text: string): Uint8Array {
  const outgoing = encodeOutgoing(codec, text);
  if (outgoing.refused.length > 0) {
    const { reason } = outgoing.refused[0]!;
    throw new UnencodableMessageError(reason, localAnswers(text, reason));
  }
  return outgoing.bytes!;
}

/**
 * Part of a JSON array given a member a piece (Transport.sendPieces with `members`: the first
 * piece `[` and a member, each further one `,` and a member, the last also `]`) as the codec's
 * bytes: the array's head first (`first`), then each member's bytes, so that a batch's reply
 * is converted a turn's worth at a time, not joined and converted whole. The members are
 * responses (JSON objects), which textToBinary never refuses.
 */
export function arrayPartToBinary(
  codec: WireCodec,
  parts: readonly string[],
  first: boolean,
  members: number,
): Uint8Array {
  const chunks: Uint8Array[] = first ? [arrayHead(codec, members)] : [];
  let length = chunks[0]?.length ?? 0;
  for (const part of parts) {
    // A member is an object: a part that ends with `]` is the last, closing the array.
    const bytes = textToBinary(codec, part.slice(1, part.endsWith(']') ? -1 : undefined));
    chunks.push(bytes);
    length += bytes.length;
  }
  const joined = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    joined.set(chunk, at);
    at += chunk.length;
  }
  return joined;
}

/**
 * The codec's head of an array of `count` values, what precedes their bytes: read off its
 * encoding of `count` nulls, one byte each in MessagePack (0xc0) and CBOR (0xf6).
 */
function arrayHead(codec: WireCodec, count: number): Uint8Array {
  const nulls = codec.encode(new Array<null>(count).fill(null));
  return nulls.subarray(0, nulls.length - count);
}

/**
 * When every message of `text` is a call (a request with an id): the text of the -32603
 * answers, `data: { reason }`, its sender reads as the peer's (a batch's answers in a batch).
 * Undefined otherwise: a notification or response unsent has no one to answer, and its loss is
 * told by closing the connection.
 */
function localAnswers(text: string, reason: string): string | undefined {
  const parsed: unknown = JSON.parse(text);
  const answers: unknown[] = [];
  for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
    const { id, method } = (message ?? {}) as { id?: unknown; method?: unknown };
    if (id === undefined || method === undefined) return undefined;
    answers.push(internalError(id, reason));
  }
  return JSON.stringify(Array.isArray(parsed) ? answers : answers[0]);
}

/** A message of an outgoing text that its codec cannot encode, and why. */
export interface RefusedMessage {
  /** The parsed message: a request or a notification (a response goes as -32603 instead). */
  readonly message: unknown;
  readonly reason: string;
}

/**
 * An outgoing text as the codec's bytes, with the messages left out of them: a response the
 * codec cannot encode is replaced by a -32603 Internal error for its id, `data: { reason }`;
 * a request or notification it cannot encode is left out and listed in `refused` (`bytes` is
 * undefined when nothing is left to send). Never throws: the encoder is not asked to encode
 * anything nested deeper than MAX_MESSAGE_DEPTH, holding a lone surrogate or a number that is
 * not finite, and any error of its is caught. The messages are walked one by one only when the
 * text is that deep or may hold one of those (lone-surrogates.ts mayHoldLoneSurrogate;
 * non-finite.ts mayHoldOverflowingNumber, whose match alone costs a walk of the value): an
 * ordinary message costs scans of its text.
 */
export function encodeOutgoing(
  codec: WireCodec,
  text: string,
): { bytes: Uint8Array | undefined; refused: RefusedMessage[] } {
  const parsed: unknown = JSON.parse(text);
  const value = hasWideId(parsed) ? withExactIds(codec, text, parsed) : parsed;
  if (
    !mayHoldLoneSurrogate(text) &&
    !exceedsDepth(text, MAX_MESSAGE_DEPTH) &&
    !jsonHoldsOverflowingNumber(text, parsed)
  ) {
    const bytes = tryEncode(codec, value, false);
    if (bytes instanceof Uint8Array) return { bytes, refused: [] };
  }
  // Rare: encode the messages one at a time to find those the codec cannot.
  const refused: RefusedMessage[] = [];
  const kept: unknown[] = [];
  for (const message of Array.isArray(value) ? value : [value]) {
    const encoded = tryEncode(codec, message);
    if (encoded instanceof Uint8Array) kept.push(message);
    else if (isResponse(message)) kept.push(internalError(message.id, encoded.reason));
    else refused.push({ message, reason: encoded.reason });
  }
  if (kept.length === 0) return { bytes: undefined, refused };
  const whole = Array.isArray(value) ? kept : kept[0];
  const bytes = tryEncode(codec, whole);
  // Each message encodes alone and the batch nests one level more, within the bound: this
  // fails only if the encoder fails on what it took a moment ago.
  if (!(bytes instanceof Uint8Array)) return { bytes: undefined, refused: [...refused, bytes] };
  return { bytes, refused };
}

/** Thrown by textToBinary for a text with a request or notification its codec cannot encode. */
export class UnencodableMessageError extends Error {
  constructor(
    readonly reason: string,
    /** The answers to the text's calls, when it holds nothing else (see localAnswers). */
    readonly answers: string | undefined,
  ) {
    super(`message not sent: ${reason}`);
    this.name = 'UnencodableMessageError';
  }
}

/**
 * `value` encoded, or why not; `walk`: whether its depth, its strings and its numbers are yet to
 * be checked. A lone surrogate is refused before the encoder, which would write what no decoder
 * reads as sent (U+FFFD, or bytes that are not UTF-8); so is an infinite number (JSON text
 * passed on as written can hold `1e400`), which it would write as a float every check refuses.
 */
function tryEncode(codec: WireCodec, value: unknown, walk = true): Uint8Array | RefusedMessage {
  if (walk && nestsDeeperThan(value, MAX_MESSAGE_DEPTH)) {
    return { message: value, reason: `nests deeper than ${MAX_MESSAGE_DEPTH} levels` };
  }
  if (walk && holdsLoneSurrogate(value)) {
    return { message: value, reason: loneSurrogateReason(codec.name) };
  }
  if (walk && holdsNonFiniteNumber(value)) {
    return { message: value, reason: overflowingNumberReason(codec.name) };
  }
  try {
    return codec.encode(value);
  } catch (err) {
    // Short: the reason may be a close frame's (at most 123 bytes).
    return {
      message: value,
      reason: `not encodable as ${codec.name}: ${String(err).slice(0, 60)}`,
    };
  }
}

function isResponse(message: unknown): message is { id: unknown } {
  return (
    typeof message === 'object' &&
    message !== null &&
    'id' in message &&
    !('method' in message) &&
    ('result' in message || 'error' in message)
  );
}

function internalError(id: unknown, reason: string): unknown {
  return {
    jsonrpc: '2.0',
    error: { code: ErrorCode.InternalError, message: 'Internal error', data: { reason } },
    id,
  };
}

/** Whether a parsed value nests deeper than `max`, walked without recursion. */
function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

const decoder = /* @__PURE__ */ new TextDecoder();

/**
 * A fan-out frame's UTF-8 JSON bytes as the codec's bytes. Throws an UnencodableMessageError,
 * never an encoder's error, for one it cannot encode.
 */
export function jsonBytesToBinary(codec: WireCodec, bytes: Uint8Array): Uint8Array {
  return textToBinary(codec, decoder.decode(bytes));
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
    check: (bytes, maxDepth, values = maxValues, protoKeys?: number[]) =>
      (codec.check as CheckFindingProtoKeys)(bytes, maxDepth, values, protoKeys!),
    toText: (bytes, maxDepth, values = maxValues) => binaryToText(capped, bytes, maxDepth, values),
    toBinary: (text) => textToBinary(capped, text),
  };
  return capped;
}
