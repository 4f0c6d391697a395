/**
 * MessagePack for JSON-RPC (subprotocol `jsonrpc-2.0+msgpack`), on `msgpackr`, an optional
 * peer dependency. A separate entry so the JSON-only client bundle does not carry it:
 *
 *   import { msgpack } from 'wsrpc-gateway/msgpack';
 *   createClient({ url, encoding: msgpack });
 *
 * @packageDocumentation
 */
import { Packr, Unpackr } from 'msgpackr';
import type { WireCodec } from './encoding/codec.js';
import { withTextFrames } from './encoding/codec.js';
import { checkMsgpack } from './encoding/msgpack-check.js';

export type { WireCodec } from './encoding/codec.js';

// Plain maps and arrays only: records and structured clones are msgpackr's own extensions.
// A BigInt (an id beyond 2^53 going out) is written as int64, or uint64 past it.
const packr = /* @__PURE__ */ new Packr({ useRecords: false, moreTypes: false });
const unpackr = /* @__PURE__ */ new Unpackr({
  useRecords: false,
  mapsAsObjects: true,
  // int64 and uint64: a number within ±2^53, a BigInt beyond (exact-integers.ts writes its
  // digits). 'auto' is documented in msgpackr's README but missing from its type declarations.
  int64AsType: 'auto' as 'bigint',
});

/** The MessagePack codec: pass it as the client's `encoding`. */
export const msgpack: WireCodec = /* @__PURE__ */ withTextFrames({
  name: 'msgpack',
  subprotocol: 'jsonrpc-2.0+msgpack',
  encode: (value) => packr.pack(value),
  decode: (bytes) => unpackr.unpack(bytes) as unknown,
  check: checkMsgpack,
});
