import type { CheckResult } from './codec.js';
import { StructureWalk } from './structure-walk.js';
import { isProtoKey } from './proto-keys.js';
import { isWellFormedUtf8 } from './utf8-bytes.js';
import { isNonFiniteFloat } from './non-finite.js';

/** Bytes of the argument that follows a MessagePack type byte of fixed-size scalars. */
function scalarSize(type: number): number | undefined {
  switch (type) {
    case 0xc0: // nil
    case 0xc2: // false
    case 0xc3: // true
      return 0;
    case 0xcc:
    case 0xd0:
      return 1;
    case 0xcd:
    case 0xd1:
      return 2;
    case 0xca:
    case 0xce:
    case 0xd2:
      return 4;
    case 0xcb:
    case 0xcf:
    case 0xd3:
      return 8;
    default:
      return undefined;
  }
}

/**
 * Check one MessagePack value (see WireCodec.check). Refused as 'syntax': bin and ext types
 * (no JSON counterpart; ext also covers msgpackr's records and structured clones), a map key
 * that is not a string (nor has one), a float that is NaN or infinite (none in JSON either), the
 * unused 0xc1, and any length larger than the bytes left (every item takes at least one byte),
 * so a five-byte array32 header cannot make the decoder allocate four billion slots. Refused as
 * 'utf8': a string (a key or a value) whose bytes are not well-formed UTF-8. Refused as
 * 'values' past `maxValues` values, as 'depth' past `maxDepth` levels: whichever comes first.
 * `protoKeys`, when given, gets the offset of each map key `__proto__` (see proto-keys.ts).
 */
export function checkMsgpack(
  bytes: Uint8Array,
  maxDepth: number,
  maxValues = Infinity,
  protoKeys?: number[],
): CheckResult {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.length;
  const walk = new StructureWalk(maxDepth, maxValues);
  let pos = 0;
  const read = (size: number): number | undefined => {
    if (pos + size > end) return undefined;
    const at = pos;
    pos += size;
    return size === 1 ? view.getUint8(at) : size === 2 ? view.getUint16(at) : view.getUint32(at);
  };
  while (!walk.done) {
    if (pos >= end) return 'syntax';
    const type = bytes[pos++]!;
    // An array's items, or a map's entries; undefined for a scalar.
    let items: number | undefined;
    let map = false;
    let skip = 0;
    let text = false;
    if (type <= 0x7f || type >= 0xe0) skip = 0;
    else if (type <= 0x8f) {
      items = type & 0x0f;
      map = true;
    } else if (type <= 0x9f) items = type & 0x0f;
    else if (type <= 0xbf) {
      skip = type & 0x1f;
      text = true;
    } else if (type >= 0xd9 && type <= 0xdb) {
      const length = read(type === 0xd9 ? 1 : type === 0xda ? 2 : 4);
      if (length === undefined) return 'syntax';
      skip = length;
      text = true;
    } else if (type >= 0xdc && type <= 0xdf) {
      const count = read(type === 0xdc || type === 0xde ? 2 : 4);
      if (count === undefined) return 'syntax';
      items = count;
      map = type >= 0xde;
    } else {
      const size = scalarSize(type);
      if (size === undefined) return 'syntax'; // 0xc1, bin, ext, fixext
      skip = size;
    }
    // A map key other than a string has no JSON counterpart: read as text it would become one
    // (1 and "1" the same key).
    if (!text && walk.atKey) return 'syntax';
    if (items !== undefined && (map ? items * 2 : items) > end - pos) return 'syntax';
    if (pos + skip > end) return 'syntax';
    if ((type === 0xca || type === 0xcb) && isNonFiniteFloat(bytes, pos, skip)) return 'syntax';
    if (text) {
      if (!isWellFormedUtf8(bytes, pos, pos + skip)) return 'utf8';
      if (protoKeys && walk.atKey && isProtoKey(bytes, pos, skip)) protoKeys.push(pos);
    }
    pos += skip;
    const refusal = items === undefined ? walk.scalar() : map ? walk.map(items) : walk.array(items);
    if (refusal !== undefined) return refusal;
  }
  return pos === end ? 'ok' : 'syntax';
}
