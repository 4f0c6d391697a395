import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { parseFrame } from '../../src/protocol/classify.js';
import type { ClassifyOptions } from '../../src/protocol/classify.js';
import { createRawPeer } from '../support/peers.js';

const RUNS = 300;

type Json = unknown;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Spec 4: an id is a String, a Number or Null. */
function isValidId(value: unknown): boolean {
  return value === null || typeof value === 'string' || typeof value === 'number';
}

/** Spec 5 / 5.1: the shape of one Response object. */
function expectValidResponse(value: unknown): void {
  expect(isPlainObject(value)).toBe(true);
  const r = value as Record<string, unknown>;
  expect(r['jsonrpc']).toBe('2.0');
  expect('id' in r).toBe(true);
  expect(isValidId(r['id'])).toBe(true);
  const hasResult = 'result' in r;
  const hasError = 'error' in r;
  expect(hasResult !== hasError).toBe(true);
  for (const key of Object.keys(r)) expect(['jsonrpc', 'result', 'error', 'id']).toContain(key);
  if (hasError) {
    const e = r['error'] as Record<string, unknown>;
    expect(isPlainObject(e)).toBe(true);
    expect(Number.isInteger(e['code'])).toBe(true);
    expect(typeof e['message']).toBe('string');
    for (const key of Object.keys(e)) expect(['code', 'message', 'data']).toContain(key);
  }
}

/** Every frame is JSON, and is a Response or a non-empty array of Responses. */
function expectValidFrames(frames: string[]): unknown[] {
  expect(frames.length).toBeLessThanOrEqual(1);
  return frames.map((frame) => {
    const value: unknown = JSON.parse(frame);
    if (Array.isArray(value)) {
      expect(value.length).toBeGreaterThan(0);
      for (const item of value) expectValidResponse(item);
    } else {
      expectValidResponse(value);
    }
    return value;
  });
}

/** What safe parsing leaves of a JSON value: no own `__proto__`, no `constructor` with a `prototype`. */
function stripped(value: Json): Json {
  if (Array.isArray(value)) return value.map(stripped);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (key === '__proto__') continue;
    const v = value[key];
    if (key === 'constructor' && isPlainObject(v) && 'prototype' in v) continue;
    if (key === 'constructor' && Array.isArray(v) && 'prototype' in v) continue;
    Object.defineProperty(out, key, {
      value: stripped(v),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

type Expected =
  | { reply: false }
  | { reply: true; id: unknown; result: unknown }
  | { reply: true; id: unknown; code: number };

/**
 * The specification's answer to one member, for a peer with `echo` (returns
 * its params) and `boom` (throws) registered. `m` is the value as parsed from the wire.
 */
function expectedFor(m: Json): Expected {
  const invalid = (id: unknown): Expected => ({ reply: true, id, code: -32600 });
  if (!isPlainObject(m)) return invalid(null);
  const hasId = Object.prototype.hasOwnProperty.call(m, 'id');
  const id = m['id'];
  const idIfValid = hasId && isValidId(id) ? id : null;
  if (m['jsonrpc'] !== '2.0') return invalid(idIfValid);
  if (typeof m['method'] !== 'string') return invalid(idIfValid);
  if (hasId && !isValidId(id)) return invalid(null);
  const hasParams = Object.prototype.hasOwnProperty.call(m, 'params');
  const params = m['params'];
  if (hasParams && (params === null || typeof params !== 'object')) return invalid(idIfValid);
  if (!hasId) return { reply: false };
  const method = m['method'];
  if (method === 'echo') return { reply: true, id, result: hasParams ? stripped(params) : null };
  if (method === 'boom') return { reply: true, id, code: -32603 };
  if (method === 'rpc.ping') return { reply: true, id, result: 'pong' };
  return { reply: true, id, code: -32601 };
}

function expectMatches(response: unknown, expected: Expected): void {
  expect(expected.reply).toBe(true);
  if (!expected.reply) return;
  const r = response as Record<string, unknown>;
  // `===` so that ids compare as the wire sees them (0 and -0 are one JSON number).
  expect(r['id'] === expected.id).toBe(true);
  if ('code' in expected) {
    expect((r['error'] as { code: number }).code).toBe(expected.code);
  } else {
    expect(r['error']).toBeUndefined();
    expect(r['result']).toEqual(expected.result);
  }
}

function rawPeer() {
  const raw = createRawPeer();
  raw.peer.registry.method('echo', (params: unknown) => params);
  raw.peer.registry.method('boom', () => {
    throw new Error('boom');
  });
  return raw;
}

const anyString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', ',', ':', '1', 'a', ' ') }),
);

const classifyOptions: fc.Arbitrary<ClassifyOptions> = fc.record(
  {
    acceptV1: fc.boolean(),
    maxBatch: fc.integer({ min: 0, max: 5 }),
    maxDepth: fc.integer({ min: 0, max: 6 }),
  },
  { requiredKeys: [] },
);

const smallJson = fc.jsonValue({ maxDepth: 3 });

/** Objects built to look like requests: every member optional, of a right or a random type. */
const anyShape = fc.record(
  {
    jsonrpc: fc.oneof(
      { arbitrary: fc.constant('2.0'), weight: 6 },
      { arbitrary: fc.constantFrom('1.0', '2', 2, null), weight: 1 },
      { arbitrary: smallJson, weight: 1 },
    ),
    method: fc.oneof(
      { arbitrary: fc.constantFrom('echo', 'boom', 'missing', 'rpc.ping', 'rpc.x'), weight: 6 },
      { arbitrary: fc.string(), weight: 2 },
      { arbitrary: smallJson, weight: 1 },
    ),
    params: fc.oneof(
      { arbitrary: fc.array(smallJson, { maxLength: 4 }), weight: 3 },
      { arbitrary: fc.dictionary(fc.string(), smallJson, { maxKeys: 4 }), weight: 3 },
      { arbitrary: smallJson, weight: 2 },
    ),
    id: fc.oneof(
      { arbitrary: fc.string(), weight: 3 },
      { arbitrary: fc.integer(), weight: 3 },
      { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
      { arbitrary: fc.constant(null), weight: 2 },
      { arbitrary: smallJson, weight: 2 },
    ),
  },
  { requiredKeys: [] },
);

/** Well-formed requests and notifications, so the valid paths are exercised often too. */
const wellFormed = fc.record(
  {
    jsonrpc: fc.constant('2.0'),
    method: fc.constantFrom('echo', 'boom', 'missing', 'rpc.ping'),
    params: fc.oneof(
      fc.array(smallJson, { maxLength: 4 }),
      fc.dictionary(fc.string(), smallJson, { maxKeys: 4 }),
    ),
    id: fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true }), fc.constant(null)),
  },
  { requiredKeys: ['jsonrpc', 'method'] },
);

const requestLike = fc.oneof(anyShape, wellFormed);

describe('parseFrame properties', () => {
  it('(a) never throws on any string and yields at least one message', () => {
    fc.assert(
      fc.property(anyString, classifyOptions, (text, options) => {
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
        const wire: unknown = JSON.parse(JSON.stringify(obj));
        const [m] = parseFrame(JSON.stringify(obj)).messages;
        const expected = expectedFor(wire);
        if (!expected.reply) {
          expect(m!.kind).toBe('notification');
        } else if ('code' in expected && expected.code === -32600) {
          expect(m).toMatchObject({ kind: 'invalid', error: { code: -32600 } });
          expect((m as { id: unknown }).id === expected.id).toBe(true);
        } else {
          expect(m!.kind).toBe('request');
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
      fc.asyncProperty(anyString, async (text) => {
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
        const wire: unknown = JSON.parse(text);
        const frames = await raw.send(text);
        const values = expectValidFrames(frames);
        const expected = expectedFor(wire);
        if (!expected.reply) {
          expect(values).toEqual([]);
          return;
        }
        expect(values).toHaveLength(1);
        expect(Array.isArray(values[0])).toBe(false);
        expectMatches(values[0], expected);
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
          const expected = wire.map(expectedFor).filter((e) => e.reply);
          if (expected.length === 0) {
            expect(values).toEqual([]);
            return;
          }
          expect(values).toHaveLength(1);
          const replies = values[0] as unknown[];
          expect(Array.isArray(replies)).toBe(true);
          expect(replies).toHaveLength(expected.length);
          replies.forEach((r, i) => expectMatches(r, expected[i]!));
        },
      ),
      { numRuns: RUNS },
    );
  });
});
