import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { parseFrame } from '../../src/protocol/classify.js';
import type { ClassifyOptions } from '../../src/protocol/classify.js';
import { anyText, requestShaped, wellFormedRequest } from '../support/jsonrpc-arbitraries.js';
import {
  analyseText,
  classifyMember,
  expectedUnit,
  isPlainObject,
  isValidId,
  memberMatches,
  replyProblem,
  roundTrip,
} from '../support/jsonrpc-model.js';
import type { MemberExpect, Service } from '../support/jsonrpc-model.js';
import { createRawPeer } from '../support/peers.js';

const RUNS = 300;

/** Every frame is JSON, and is a Response or a non-empty array of Responses. */
function expectValidFrames(frames: string[]): unknown[] {
  expect(frames.length).toBeLessThanOrEqual(1);
  return frames.map((frame) => {
    const value: unknown = JSON.parse(frame);
    expect(replyProblem(value)).toBeUndefined();
    return value;
  });
}

/** The peer's methods: `echo` returns its params, `boom` throws, `rpc.ping` is built in. */
const service: Service = ({ method, params }) => {
  if (method === 'echo') return [{ result: roundTrip(params) }];
  if (method === 'boom') return [{ code: -32603 }];
  if (method === 'rpc.ping') return [{ result: 'pong' }];
  return [{ code: -32601 }];
};

/** The Responses a batch is due, in the order of its members (the peer keeps it). */
function dueInOrder(batch: unknown): MemberExpect[] {
  const unit = expectedUnit({ value: batch }, service);
  if (unit === undefined) return [];
  expect(unit.batch).toBe(true);
  return unit.batch ? unit.members : [];
}

/** The one Response a request-like text is due, or undefined when it gets none. */
function dueFor(text: string): MemberExpect | undefined {
  const unit = expectedUnit(analyseText(text), service);
  if (unit === undefined) return undefined;
  expect(unit.batch).toBe(false);
  return unit.batch ? undefined : unit.member;
}

function rawPeer() {
  const raw = createRawPeer();
  raw.peer.registry.method('echo', (params: unknown) => params);
  raw.peer.registry.method('boom', () => {
    throw new Error('boom');
  });
  return raw;
}

const classifyOptions: fc.Arbitrary<ClassifyOptions> = fc.record(
  {
    acceptV1: fc.boolean(),
    maxBatch: fc.integer({ min: 0, max: 5 }),
    maxDepth: fc.integer({ min: 0, max: 6 }),
  },
  { requiredKeys: [] },
);

const smallJson = fc.jsonValue({ maxDepth: 3 });

const requestLike = fc.oneof(
  requestShaped(['echo', 'boom', 'missing', 'rpc.ping', 'rpc.x']),
  wellFormedRequest(['echo', 'boom', 'missing', 'rpc.ping']),
);

describe('parseFrame properties', () => {
  it('(a) never throws on any string and yields at least one message', () => {
    fc.assert(
      fc.property(anyText, classifyOptions, (text, options) => {
        const frame = parseFrame(text, options);
        expect(frame.messages.length).toBeGreaterThanOrEqual(1);
        if (!frame.batch) expect(frame.messages).toHaveLength(1);
        for (const m of frame.messages) {
          if (m.kind === 'invalid') {
            expect(Number.isInteger(m.error.code)).toBe(true);
            expect(isValidId(m.id)).toBe(true);
          }
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('(b) never throws on any serialized JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), classifyOptions, (value, options) => {
        const text = JSON.stringify(value);
        const frame = parseFrame(text, options);
        expect(frame.messages.length).toBeGreaterThanOrEqual(1);
        // Without limits, valid JSON is never a parse error.
        const unlimited = parseFrame(text);
        for (const m of unlimited.messages) {
          if (m.kind === 'invalid') expect(m.error.code).not.toBe(-32700);
        }
        // A non-empty array is a batch with one message per member.
        if (Array.isArray(value) && value.length > 0) {
          expect(unlimited.batch).toBe(true);
          expect(unlimited.messages).toHaveLength(value.length);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('(b) classifies request-like objects as the specification says', () => {
    fc.assert(
      fc.property(requestLike, (obj) => {
        const text = JSON.stringify(obj);
        const [m] = parseFrame(text).messages;
        const expected = classifyMember(JSON.parse(text));
        expect(m!.kind).toBe(expected.kind);
        if (expected.kind === 'invalid') {
          expect(m).toMatchObject({ kind: 'invalid', error: { code: -32600 } });
        }
        if (expected.kind === 'invalid' || expected.kind === 'request') {
          // `===` so that ids compare as the wire sees them (0 and -0 are one JSON number).
          expect((m as { id: unknown }).id === expected.id).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe('Peer properties: every reply is a valid Response', () => {
  it('(c) any string', async () => {
    await fc.assert(
      fc.asyncProperty(anyText, async (text) => {
        const raw = rawPeer();
        const frames = await raw.send(text);
        const values = expectValidFrames(frames);
        // Not JSON, or JSON that is not a notification batch: exactly one frame.
        let parsedOk = true;
        try {
          JSON.parse(text);
        } catch {
          parsedOk = false;
        }
        if (!parsedOk) {
          expect(values).toEqual([
            { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null },
          ]);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('(c) any JSON value', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), async (value) => {
        const raw = rawPeer();
        const frames = await raw.send(JSON.stringify(value));
        const values = expectValidFrames(frames);
        if (!Array.isArray(value) && !isPlainObject(value)) {
          expect(values).toEqual([
            { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request' }, id: null },
          ]);
        }
        if (Array.isArray(value) && value.length === 0) {
          expect(Array.isArray(values[0])).toBe(false);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('(c) any request-like object: one reply with its id, or none for a notification', async () => {
    await fc.assert(
      fc.asyncProperty(requestLike, async (obj) => {
        const raw = rawPeer();
        const text = JSON.stringify(obj);
        const frames = await raw.send(text);
        const values = expectValidFrames(frames);
        const expected = dueFor(text);
        if (!expected) {
          expect(values).toEqual([]);
          return;
        }
        expect(values).toHaveLength(1);
        expect(Array.isArray(values[0])).toBe(false);
        expect(memberMatches(values[0], expected)).toBe(true);
      }),
      { numRuns: RUNS },
    );
  });

  it('(c) any batch of request-like objects: replies in order, none for notifications', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof({ arbitrary: requestLike, weight: 5 }, smallJson), { maxLength: 6 }),
        async (members) => {
          const raw = rawPeer();
          const text = JSON.stringify(members);
          const wire = JSON.parse(text) as unknown[];
          const frames = await raw.send(text);
          const values = expectValidFrames(frames);
          if (wire.length === 0) {
            expect(values).toEqual([
              { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request' }, id: null },
            ]);
            return;
          }
          const analysed = analyseText(text);
          const expected = 'value' in analysed ? dueInOrder(analysed.value) : [];
          if (expected.length === 0) {
            expect(values).toEqual([]);
            return;
          }
          expect(values).toHaveLength(1);
          const replies = values[0] as unknown[];
          expect(Array.isArray(replies)).toBe(true);
          expect(replies).toHaveLength(expected.length);
          replies.forEach((r, i) => expect(memberMatches(r, expected[i]!)).toBe(true));
        },
      ),
      { numRuns: RUNS },
    );
  });
});
