/**
 * A POST /rpc body that is not valid UTF-8 is not JSON text: it is answered -32700 Parse error
 * (200, id null, `data.reason` "invalid UTF-8") as a syntax error is, never decoded with U+FFFD
 * in place of the bad bytes and then handled as the request that decoding makes.
 */
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import type { RunningGateway } from '../support/gateway.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Answer {
  status: number;
  type: string | null;
  body: string;
}

async function postBytes(httpUrl: string, body: Uint8Array): Promise<Answer> {
  const response = await fetch(`${httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // A copy on an ArrayBuffer of its own: what fetch's BodyInit type takes.
    body: new Uint8Array(body),
  });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: await response.text(),
  };
}

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => Buffer.from(part)));

const INVALID_UTF8 =
  '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":{"reason":"invalid UTF-8"}},"id":null}';

/** Whether `body` is a single -32700 answer. */
function isParseError(answer: Answer): boolean {
  if (answer.status !== 200) return false;
  const reply = JSON.parse(answer.body) as { error?: { code?: number } };
  return !Array.isArray(reply) && reply.error?.code === -32700;
}

async function echoGateway(limits = {}): Promise<RunningGateway> {
  const running = await res.gateway({ limits });
  running.gateway.method('echo', (params) => params);
  return running;
}

describe('POST /rpc with a body that is not valid UTF-8', () => {
  it('a bad byte in the method name is -32700, not -32601 for the name U+FFFD makes', async () => {
    const { httpUrl } = await echoGateway();
    const answer = await postBytes(
      httpUrl,
      bytes('{"jsonrpc":"2.0","id":1,"method":"ec', [0xff], 'ho"}'),
    );
    expect(answer).toEqual({
      status: 200,
      type: 'application/json; charset=utf-8',
      body: INVALID_UTF8,
    });
  });

  it.each([
    ['a lone continuation byte', [0x80]],
    ['0xff', [0xff]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['a sequence cut short', [0xe2, 0x82]],
  ])('%s inside a string param is -32700', async (_name, bad) => {
    const { httpUrl } = await echoGateway();
    const answer = await postBytes(
      httpUrl,
      bytes('{"jsonrpc":"2.0","id":1,"method":"echo","params":["a', bad, 'b"]}'),
    );
    expect(answer).toEqual({
      status: 200,
      type: 'application/json; charset=utf-8',
      body: INVALID_UTF8,
    });
  });

  it('a sequence cut short at the end of the body is -32700', async () => {
    const { httpUrl } = await echoGateway();
    const answer = await postBytes(
      httpUrl,
      bytes('{"jsonrpc":"2.0","id":1,"method":"echo"}', [0xf0, 0x9f]),
    );
    expect(answer.body).toBe(INVALID_UTF8);
  });

  it('well-formed UTF-8 of one to four bytes a character is read as sent', async () => {
    const { httpUrl } = await echoGateway();
    const params = ['a', 'é', '€', '😀', '\u{10ffff}'];
    const answer = await postBytes(
      httpUrl,
      bytes(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params })),
    );
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ jsonrpc: '2.0', result: params, id: 1 });
  });

  it('takes a token of the address rate bucket, as a syntax error does', async () => {
    const { httpUrl } = await echoGateway({ ratePerSecond: 0.001, rateBurst: 1 });
    const bad = await postBytes(httpUrl, bytes('{"jsonrpc":"2.0","id":1,"method":"echo"', [0xff]));
    expect(bad.body).toBe(INVALID_UTF8);
    const next = await postBytes(httpUrl, bytes('{"jsonrpc":"2.0","id":2,"method":"echo"}'));
    expect(JSON.parse(next.body)).toMatchObject({ error: { code: -32003 }, id: 2 });
  });
});

describe('POST /rpc answers -32700 exactly when the body is not UTF-8 JSON text', () => {
  let running: RunningGateway;
  const own = new Resources();
  beforeAll(async () => {
    // No rate limit: every run's body is answered for itself.
    running = await own.gateway({ limits: { ratePerSecond: 0 } });
    running.gateway.method('echo', (params) => params);
  });
  afterAll(() => own.cleanup());

  const strict = new TextDecoder('utf-8', { fatal: true });
  const isUtf8 = (body: Uint8Array): boolean => {
    try {
      strict.decode(body);
      return true;
    } catch {
      return false;
    }
  };
  const isJson = (text: string): boolean => {
    try {
      JSON.parse(text);
      return true;
    } catch {
      return false;
    }
  };

  const request = fc
    .record({
      id: fc.nat(),
      method: fc.constantFrom('echo', 'missing'),
      params: fc.array(fc.string({ unit: 'binary' }), { maxLength: 3 }),
    })
    .map((message) => Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message })));
  /** A request with one byte changed to a byte of 0x80 and up, or one such byte inserted. */
  const corrupted = fc
    .tuple(request, fc.nat(), fc.integer({ min: 0x80, max: 0xff }), fc.boolean())
    .map(([body, at, byte, insert]) => {
      const index = at % (body.length + 1);
      const out = Buffer.from(body);
      if (!insert && index < body.length) {
        out[index] = byte;
        return out;
      }
      return Buffer.concat([body.subarray(0, index), Buffer.from([byte]), body.subarray(index)]);
    });
  const body = fc.oneof(
    fc.uint8Array({ maxLength: 48 }),
    fc.json().map((text) => Buffer.from(text)),
    request,
    corrupted,
  );

  it('for any byte string', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (sent) => {
        const answer = await postBytes(running.httpUrl, sent);
        const utf8 = isUtf8(sent);
        const expected = !utf8 || !isJson(Buffer.from(sent).toString('utf8'));
        expect(isParseError(answer)).toBe(expected);
        if (!utf8) expect(answer.body).toBe(INVALID_UTF8);
      }),
      { numRuns: 300 },
    );
  });
});
