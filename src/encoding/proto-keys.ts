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
