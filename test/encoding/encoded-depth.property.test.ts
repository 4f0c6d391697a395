/**
 * The bound on what MessagePack and CBOR are asked to encode (encoded-depth.ts), as a property
 * over both codecs: any outgoing message nested within MAX_MESSAGE_DEPTH round-trips exactly;
 * any deeper one is refused precisely (a response as -32603 with a reason, anything else listed
 * as refused), and encoding never throws.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { binaryToText, encodeOutgoing } from '../../src/encoding/codec.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { MAX_MESSAGE_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';

/** A JSON value wrapped in `levels` arrays or single-key objects, `0` for array, 1 for object. */
const deepValue = (maxLevels: number) =>
  fc
    .tuple(
      fc.jsonValue({ maxDepth: 2 }).filter((v) => typeof v !== 'object' || v === null),
      fc
        .oneof(
          fc.integer({ min: 0, max: maxLevels }),
          // Either side of the bound, whatever the envelope.
          fc.integer({ min: MAX_MESSAGE_DEPTH - 3, max: MAX_MESSAGE_DEPTH + 1 }),
        )
        .chain((levels) =>
          fc.array(fc.constantFrom(0, 1), { minLength: levels, maxLength: levels }),
        ),
    )
    .map(([leaf, wrappers]) => ({
      value: wrappers.reduce<unknown>((inner, kind) => (kind === 0 ? [inner] : { k: inner }), leaf),
      depth: wrappers.length,
    }));

const message = fc.constantFrom('response', 'notification', 'request');

function messageText(kind: string, value: unknown): string {
  if (kind === 'response') return JSON.stringify({ jsonrpc: '2.0', result: value, id: 7 });
  const params = { v: value };
  return kind === 'notification'
    ? JSON.stringify({ jsonrpc: '2.0', method: 'm', params })
    : JSON.stringify({ jsonrpc: '2.0', method: 'm', params, id: 7 });
}

describe.each([msgpack, cbor])('$name', (codec: WireCodec) => {
  it('within the bound round-trips; past it is refused precisely, never thrown', () => {
    fc.assert(
      fc.property(message, deepValue(MAX_MESSAGE_DEPTH + 40), (kind, { value, depth }) => {
        const text = messageText(kind, value);
        // The envelope: the message object, and the params object around a call's value.
        const messageDepth = depth + (kind === 'response' ? 1 : 2);
        const outgoing = encodeOutgoing(codec, text);
        if (messageDepth <= MAX_MESSAGE_DEPTH) {
          expect(outgoing.refused).toEqual([]);
          expect(binaryToText(codec, outgoing.bytes!, MAX_MESSAGE_DEPTH)).toBe(text);
        } else if (kind === 'response') {
          expect(outgoing.refused).toEqual([]);
          expect(codec.decode(outgoing.bytes!)).toEqual({
            jsonrpc: '2.0',
            error: {
              code: ErrorCode.InternalError,
              message: 'Internal error',
              data: { reason: `nests deeper than ${MAX_MESSAGE_DEPTH} levels` },
            },
            id: 7,
          });
        } else {
          expect(outgoing.bytes).toBeUndefined();
          expect(outgoing.refused).toHaveLength(1);
          expect(outgoing.refused[0]!.reason).toBe(`nests deeper than ${MAX_MESSAGE_DEPTH} levels`);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('a batch keeps what it can encode and answers the rest', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 1e6 })), {
          minLength: 1,
          maxLength: 5,
        }),
        (members) => {
          const deep = (n: number): unknown => (n === 0 ? 0 : [deep(n - 1)]);
          const batch = members.map(([tooDeep, id]) => ({
            jsonrpc: '2.0',
            result: deep(tooDeep ? MAX_MESSAGE_DEPTH + 5 : 3),
            id,
          }));
          const outgoing = encodeOutgoing(codec, JSON.stringify(batch));
          expect(outgoing.refused).toEqual([]);
          const decoded = codec.decode(outgoing.bytes!) as { id: number; error?: unknown }[];
          expect(decoded.map((m) => m.id)).toEqual(members.map(([, id]) => id));
          expect(decoded.map((m) => m.error !== undefined)).toEqual(members.map(([d]) => d));
        },
      ),
      { numRuns: 50 },
    );
  });
});
