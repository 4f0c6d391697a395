/**
 * What a -32602 from contract validation carries is bounded whatever the params and whatever
 * the schema reports: at most MAX_REPORTED_ISSUES issues and MAX_ISSUES_DATA_BYTES of `data` in
 * any encoding (the rest counted in `omitted`), each path key and message cut to a bound, a deep
 * path shown by its first and last segments. So a request that fails in many places, under a
 * huge record key, or deep down a recursive schema is never answered with a reply many times its
 * size (a 100 KB key under 1,000 failing items made 100 MB; 64-character keys 512 deep, 2 MB).
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { z } from 'zod';
import { cbor } from '../../src/cbor.js';
import { defineContract } from '../../src/contract/contract.js';
import type { MethodSpec } from '../../src/contract/contract.js';
import {
  ISSUE_PATH_HEAD,
  ISSUE_PATH_TAIL,
  MAX_ISSUE_KEY_CHARS,
  MAX_ISSUE_MESSAGE_CHARS,
  MAX_ISSUES_DATA_BYTES,
  MAX_REPORTED_ISSUES,
  PATH_GAP,
  validateParams,
} from '../../src/contract/validate.js';
import type { ValidationIssues } from '../../src/contract/validate.js';
import { msgpack } from '../../src/msgpack.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import type { Params } from '../../src/protocol/types.js';
import { implementContract } from '../../src/server/contract-server.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A record of records, as deep as the params go: every level is a segment of the path. */
const Nested: z.ZodType<Record<string, unknown>> = z.record(
  z.string(),
  z.lazy(() => Nested),
);

const contract = defineContract({
  name: 'bounds',
  version: '1.0.0',
  methods: {
    sum: { params: z.object({ values: z.array(z.number()) }), result: z.number() },
    tally: {
      params: z.object({ counts: z.record(z.string(), z.array(z.number())) }),
      result: z.number(),
    },
    nest: { params: z.object({ r: Nested }), result: z.number() },
  },
});

function failureOf(spec: MethodSpec, params: unknown): ValidationIssues {
  try {
    validateParams(spec, params as Params);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidParamsError);
    return (err as InvalidParamsError).data as ValidationIssues;
  }
  throw new Error('validated');
}

function issuesOf(method: 'sum' | 'tally' | 'nest', params: Params): ValidationIssues {
  return failureOf(contract.methods[method]!, params);
}

/** A schema that reports exactly `issues`, whatever it is given: any failure a library may report. */
function reporting(issues: StandardSchemaV1.Issue[]): MethodSpec {
  const params: StandardSchemaV1 = {
    '~standard': { version: 1, vendor: 'test', validate: () => ({ issues }) },
  };
  return { params };
}

/** The -32602 reply to request id 1 as the gateway sends it, in each encoding: its bytes. */
function encodedSizes(data: ValidationIssues): Record<string, { reply: number; data: number }> {
  const reply = (value: unknown) => ({
    jsonrpc: '2.0',
    id: 1,
    error: { code: -32602, message: 'Invalid params', data: value },
  });
  const json = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
  return {
    json: { reply: json(reply(data)), data: json(data) },
    msgpack: { reply: msgpack.encode(reply(data)).length, data: msgpack.encode(data).length },
    cbor: { reply: cbor.encode(reply(data)).length, data: cbor.encode(data).length },
  };
}

/** What the reply to an id of 1 adds to its `data`, in any of the encodings. */
const ENVELOPE_BYTES = 100;

/** Text of the kinds that cost most to encode: escapes, 2-, 3- and 4-byte UTF-8, lone halves. */
const costlyUnit = fc.constantFrom('a', '"', '\u0001', '\n', 'é', '€', '😀', '\ud800', '\udc00');

/** Short text, or text past its bound (fast-check's default size keeps strings short). */
const textUpTo = (bound: number, unit: fc.Arbitrary<string> | 'grapheme' = costlyUnit) =>
  fc.oneof(
    fc.string({ unit, maxLength: 8 }),
    fc.string({ unit, minLength: bound - 2, maxLength: 3 * bound, size: 'max' }),
  );

/** A path short enough to show whole, or one deeper than a path shows. */
const pathOf = <T>(segment: fc.Arbitrary<T>) =>
  fc.oneof(
    fc.array(segment, { maxLength: ISSUE_PATH_HEAD + ISSUE_PATH_TAIL }),
    fc.array(segment, { minLength: ISSUE_PATH_HEAD + ISSUE_PATH_TAIL, maxLength: 600 }),
  );

const segment: fc.Arbitrary<PropertyKey | StandardSchemaV1.PathSegment> = fc.oneof(
  textUpTo(MAX_ISSUE_KEY_CHARS),
  fc.integer(),
  fc.double(),
  fc.constant(Symbol('s')),
  textUpTo(MAX_ISSUE_KEY_CHARS).map((key) => ({ key })),
);

const issue: fc.Arbitrary<StandardSchemaV1.Issue> = fc.record(
  { message: textUpTo(MAX_ISSUE_MESSAGE_CHARS), path: pathOf(segment) },
  { requiredKeys: ['message'] },
);

/** Every string in `value`, keys included. */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, v]) => [key, ...stringsIn(v)]);
  }
  return [];
}

const isWellFormed = (text: string) => !/\p{Cs}/u.test(text);

describe('a validation failure’s data', () => {
  it('reports at most MAX_REPORTED_ISSUES issues, the rest counted in omitted', () => {
    const data = issuesOf('sum', { values: Array<string>(1_000).fill('') });
    expect(data.issues).toHaveLength(MAX_REPORTED_ISSUES);
    expect(data.omitted).toBe(1_000 - MAX_REPORTED_ISSUES);
    expect(data.issues[0]!.path).toEqual(['values', 0]);
    // Under the bound, all of them, and no omitted member.
    const few = issuesOf('sum', { values: ['', 1, ''] });
    expect(few.issues.map((issue) => issue.path)).toEqual([
      ['values', 0],
      ['values', 2],
    ]);
    expect('omitted' in few).toBe(false);
  });

  it('cuts a path key longer than MAX_ISSUE_KEY_CHARS', () => {
    const key = 'k'.repeat(100_000);
    const data = issuesOf('tally', { counts: { [key]: ['', ''] } });
    const cut = data.issues[0]!.path[1] as string;
    expect(cut.length).toBeLessThanOrEqual(MAX_ISSUE_KEY_CHARS + 1);
    expect(key.startsWith(cut.slice(0, -1))).toBe(true);
  });

  it('never cuts a key between the halves of a surrogate pair', () => {
    // 'a' first: the cut at MAX_ISSUE_KEY_CHARS falls between the halves of an emoji.
    const key = `a${'😀'.repeat(MAX_ISSUE_KEY_CHARS)}`;
    const shown = issuesOf('tally', { counts: { [key]: [''] } }).issues[0]!.path[1] as string;
    expect(isWellFormed(shown)).toBe(true);
    expect(shown).toBe(`a${'😀'.repeat(MAX_ISSUE_KEY_CHARS / 2 - 1)}…`);
  });

  it('shows a deep path by its first and last segments, counting those left out', () => {
    const depth = 100;
    let r: Record<string, unknown> = { [`bad`]: 1 };
    for (let i = depth - 1; i >= 0; i--) r = { [`k${i}`]: r };
    const [shown] = issuesOf('nest', { r }).issues;
    const full = ['r', ...Array.from({ length: depth }, (_, i) => `k${i}`), 'bad'];
    const left = full.length - ISSUE_PATH_HEAD - ISSUE_PATH_TAIL;
    expect(shown!.path).toEqual([
      ...full.slice(0, ISSUE_PATH_HEAD),
      PATH_GAP,
      ...full.slice(full.length - ISSUE_PATH_TAIL),
    ]);
    expect(shown!.pathOmitted).toBe(left);
    // A path within the bound is shown whole, without pathOmitted.
    const [whole] = issuesOf('nest', { r: { a: { b: 1 } } }).issues;
    expect(whole).toEqual({ path: ['r', 'a', 'b'], message: expect.any(String) });
  });

  it('is bounded in every encoding for any failure a schema reports', () => {
    fc.assert(
      fc.property(fc.array(issue, { minLength: 1, maxLength: 60, size: 'max' }), (issues) => {
        const data = failureOf(reporting(issues), {});
        expect(data.issues.length).toBeGreaterThanOrEqual(1);
        expect(data.issues.length).toBeLessThanOrEqual(MAX_REPORTED_ISSUES);
        expect(data.issues.length + (data.omitted ?? 0)).toBe(issues.length);
        for (const shown of data.issues) {
          expect(shown.path.length).toBeLessThanOrEqual(ISSUE_PATH_HEAD + 1 + ISSUE_PATH_TAIL);
          expect(shown.message.length).toBeLessThanOrEqual(MAX_ISSUE_MESSAGE_CHARS + 1);
        }
        for (const size of Object.values(encodedSizes(data))) {
          expect(size.data).toBeLessThanOrEqual(MAX_ISSUES_DATA_BYTES);
          expect(size.reply).toBeLessThanOrEqual(MAX_ISSUES_DATA_BYTES + ENVELOPE_BYTES);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('holds no lone surrogate that the failure did not: well-formed keys stay well-formed', () => {
    const text = textUpTo(MAX_ISSUE_MESSAGE_CHARS, 'grapheme');
    const key = textUpTo(MAX_ISSUE_KEY_CHARS, 'grapheme');
    fc.assert(
      fc.property(
        fc.array(fc.record({ message: text, path: pathOf(key) }), { minLength: 1, maxLength: 5 }),
        (issues) => {
          const data = failureOf(reporting(issues), {});
          for (const text of stringsIn(data)) expect(isWellFormed(text)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });
});

/** The -32602 reply to `request`, as the bytes of the frame the gateway sent. */
async function replyTo(url: string, protocol: string, request: Buffer | string): Promise<Buffer> {
  const socket = await openSocket(res, url, protocol);
  const reply = new Promise<Buffer>((resolve) =>
    socket.once('message', (data) => resolve(data as Buffer)),
  );
  socket.send(request);
  return reply;
}

describe('over the wire', () => {
  it('a request with a huge key under many failing items gets a small reply', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxMessageBytes: 1 << 20 } });
    implementContract(gateway, contract, {
      methods: { sum: () => 0, tally: () => 0, nest: () => 0 },
    });
    const socket = new WebSocket(url);
    res.track(socket);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const key = 'k'.repeat(100_000);
    const request = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tally',
      params: { counts: { [key]: Array<string>(1_000).fill('') } },
    });
    const answered = new Promise<string>((resolve) =>
      socket.once('message', (data) => resolve((data as Buffer).toString('utf8'))),
    );
    socket.send(request);
    const reply = await answered;
    expect(reply.length).toBeLessThan(request.length / 10);
    expect(JSON.parse(reply)).toMatchObject({
      id: 1,
      error: { code: -32602, data: { omitted: 1_000 - MAX_REPORTED_ISSUES } },
    });
  });

  it.each([
    ['json', 'k'],
    ['json', '€'],
    ['msgpack', '€'],
    ['cbor', '€'],
  ] as const)(
    '%s: 25 failures under 64-character "%s" keys nested to maxDepth get a bounded reply',
    async (encoding, char) => {
      const maxDepth = 512;
      const { gateway, url } = await res.gateway({
        encodings: ['json', 'msgpack', 'cbor'],
        limits: { maxDepth, maxMessageBytes: 1 << 20 },
      });
      implementContract(gateway, contract, {
        methods: { sum: () => 0, tally: () => 0, nest: () => 0 },
      });
      const key = char.repeat(MAX_ISSUE_KEY_CHARS);
      let r: Record<string, unknown> = Object.fromEntries(
        Array.from({ length: 25 }, (_, i) => [`${i}`, 'bad']),
      );
      for (let i = 0; i < maxDepth - 5; i++) r = { [key]: r };
      const message = { jsonrpc: '2.0', id: 1, method: 'nest', params: { r } };
      const codec = encoding === 'msgpack' ? msgpack : encoding === 'cbor' ? cbor : undefined;
      const reply = await replyTo(
        url,
        codec ? codec.subprotocol : 'jsonrpc-2.0',
        codec ? Buffer.from(codec.encode(message)) : JSON.stringify(message),
      );
      expect(reply.length).toBeLessThanOrEqual(MAX_ISSUES_DATA_BYTES + ENVELOPE_BYTES);
      const answer = (codec ? codec.decode(reply) : JSON.parse(reply.toString('utf8'))) as {
        error: { code: number; data: ValidationIssues };
      };
      expect(answer.error.code).toBe(-32602);
      expect(answer.error.data.issues[0]!.pathOmitted).toBeGreaterThan(maxDepth - 30);
    },
  );

  it('msgpack: a key cut at a surrogate pair is answered -32602, not refused as unencodable', async () => {
    const { gateway, url } = await res.gateway({ encodings: ['json', 'msgpack'] });
    implementContract(gateway, contract, {
      methods: { sum: () => 0, tally: () => 0, nest: () => 0 },
    });
    const key = `a${'😀'.repeat(MAX_ISSUE_KEY_CHARS)}`;
    const message = { jsonrpc: '2.0', id: 1, method: 'tally', params: { counts: { [key]: [''] } } };
    const reply = await replyTo(url, msgpack.subprotocol, Buffer.from(msgpack.encode(message)));
    expect(msgpack.decode(reply)).toMatchObject({
      id: 1,
      error: { code: -32602, data: { issues: [{ path: ['counts', `a${'😀'.repeat(31)}…`, 0] }] } },
    });
  });
});
