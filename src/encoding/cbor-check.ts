import type { CheckResult } from './codec.js';
import { StructureWalk } from './structure-walk.js';
import { isProtoKey } from './proto-keys.js';
import { isWellFormedUtf8 } from './utf8-bytes.js';
import { isNonFiniteFloat } from './non-finite.js';

/**
 * Check one CBOR data item (see WireCodec.check). Refused as 'syntax': byte strings and tags
 * (no JSON counterpart; tags also cover cbor-x's records, shared references and typed arrays,
 * so a tag bomb never reaches the decoder), a map key that is not a text string (nor has one), a
 * float that is NaN or infinite (none in JSON either), simple values other than false, true and
 * null (undefined included), indefinite lengths, reserved argument sizes, and any length larger
 * than the bytes left (every item takes at least one byte). Refused as 'utf8': a text string (a
 * key or a value) whose bytes are not well-formed UTF-8. Refused as 'values' past `maxValues`
 * values, as 'depth' past `maxDepth` levels: whichever comes first. `protoKeys`, when given,
 * gets the offset of each map key `__proto__` (see proto-keys.ts).
 */
export function checkCbor(
  bytes: Uint8Array,
  maxDepth: number,
  maxValues = Infinity,
  protoKeys?: number[],
): CheckResult {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.length;
  const walk = new StructureWalk(maxDepth, maxValues);
  let pos = 0;
  while (!walk.done) {
    if (pos >= end) return 'syntax';
    const initial = bytes[pos++]!;
    const major = initial >> 5;
    const info = initial & 0x1f;
    let argument: number;
    if (info < 24) argument = info;
    else if (info <= 27) {
      const size = 1 << (info - 24);
      if (pos + size > end) return 'syntax';
      argument =
        size === 1
          ? view.getUint8(pos)
          : size === 2
            ? view.getUint16(pos)
            : size === 4
              ? view.getUint32(pos)
              : view.getUint32(pos) * 2 ** 32 + view.getUint32(pos + 4);
      pos += size;
    } else return 'syntax'; // 28-30 reserved; 31 indefinite length or break
    // A map key other than a text string has no JSON counterpart: read as text it would
    // become one (1 and "1" the same key).
    if (major !== 3 && walk.atKey) return 'syntax';
    // An array's items, or a map's entries; undefined for a scalar.
    let items: number | undefined;
    switch (major) {
      case 0: // unsigned integer
      case 1: // negative integer
        break;
      case 3: // text string
        if (argument > end - pos) return 'syntax';
        if (!isWellFormedUtf8(bytes, pos, pos + argument)) return 'utf8';
        if (protoKeys && walk.atKey && isProtoKey(bytes, pos, argument)) protoKeys.push(pos);
        pos += argument;
        break;
      case 4:
        items = argument;
        break;
      case 5:
        items = argument;
        break;
      case 7:
        // false, true, null, or a float of 2, 4 or 8 bytes (read above as its argument).
        // undefined (23) has no JSON value: as an id it would drop the member and turn a
        // request into a notification, so it is refused wherever it stands, as MessagePack's
        // undefined (an ext type) is.
        if (!(info >= 20 && info <= 22) && !(info >= 25 && info <= 27)) return 'syntax';
        if (info >= 25 && isNonFiniteFloat(bytes, pos - (1 << (info - 24)), 1 << (info - 24)))
          return 'syntax';
        break;
      default: // 2 byte string, 6 tag
        return 'syntax';
    }
    if (items !== undefined && (major === 5 ? items * 2 : items) > end - pos) return 'syntax';
    const refusal =
      items === undefined ? walk.scalar() : major === 5 ? walk.map(items) : walk.array(items);
    if (refusal !== undefined) return refusal;
  }
  return pos === end ? 'ok' : 'syntax';
}
