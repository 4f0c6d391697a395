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
import { checkMsgpack } from './encoding/msgpack-check.js';

export type { WireCodec } from './encoding/codec.js';

// Plain maps and arrays only: records and structured clones are msgpackr's own extensions.
const packr = /* @__PURE__ */ new Packr({ useRecords: false, moreTypes: false });
const unpackr = /* @__PURE__ */ new Unpackr({
  useRecords: false,
  mapsAsObjects: true,
  int64AsType: 'number',
});

/** The MessagePack codec: pass it as the client's `encoding`. */
export const msgpack: WireCodec = {
  name: 'msgpack',
  subprotocol: 'jsonrpc-2.0+msgpack',
  encode: (value) => packr.pack(value),
  decode: (bytes) => unpackr.unpack(bytes) as unknown,
  check: checkMsgpack,
};
