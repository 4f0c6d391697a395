/**
 * CBOR for JSON-RPC (subprotocol `jsonrpc-2.0+cbor`), on `cbor-x`, an optional peer
 * dependency. A separate entry so the JSON-only client bundle does not carry it:
 *
 *   import { cbor } from 'wsrpc-gateway/cbor';
 *   createClient({ url, encoding: cbor });
 *
 * @packageDocumentation
 */
import { Decoder, Encoder } from 'cbor-x';
import type { WireCodec } from './encoding/codec.js';
import { withTextFrames } from './encoding/codec.js';
import { checkCbor } from './encoding/cbor-check.js';

export type { WireCodec } from './encoding/codec.js';

// Plain maps and arrays, no tags: records, shared structures and tagged types are cbor-x's own.
// An integer with an 8-byte argument decodes as a BigInt (exact-integers.ts writes its digits);
// a BigInt going out (an id beyond 2^53) is written with one, from -2^64 + 1 to 2^64 - 1.
const options = {
  useRecords: false,
  mapsAsObjects: true,
  tagUint8Array: false,
  pack: false,
  structuredClone: false,
} as const;
const encoder = /* @__PURE__ */ new Encoder(options);
const decoder = /* @__PURE__ */ new Decoder(options);

/** The CBOR codec: pass it as the client's `encoding`. */
export const cbor: WireCodec = /* @__PURE__ */ withTextFrames({
  name: 'cbor',
  subprotocol: 'jsonrpc-2.0+cbor',
  encode: (value) => encoder.encode(value),
  decode: (bytes) => decoder.decode(bytes) as unknown,
  check: checkCbor,
});
