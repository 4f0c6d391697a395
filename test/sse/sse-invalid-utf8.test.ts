/**
 * A POST to an HTTP streaming session whose body is not valid UTF-8 is not JSON text: it is
 * answered as a POST with a syntax error is (202, then -32700 under id null on the session's
 * event stream), with `data.reason` "invalid UTF-8"; it is never decoded with U+FFFD in place of
 * the bad bytes and handled as the message that decoding makes. The session goes on.
 */
import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayOptions } from '../../src/index.js';
import { startGateway } from '../support/gateway.js';
import { openStream } from './sse-raw.js';
import type { RawStream } from './sse-raw.js';

const INVALID_UTF8 =
  '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":{"reason":"invalid UTF-8"}},"id":null}';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => Buffer.from(part)));

interface Session {
  stream: RawStream;
  /** POST `body` (bytes as given) to the session: the status. */
  post: (body: Uint8Array) => Promise<number>;
  close: () => Promise<void>;
}

async function sseSession(options: GatewayOptions<unknown> = {}): Promise<Session> {
  const running = await startGateway({ routes: { events: '/rpc/events' }, ...options });
  running.gateway.method('echo', (params) => params);
  const events = `${running.httpUrl}/rpc/events`;
  const stream = await openStream(events);
  const { session, secret } = stream.session;
  const post = (body: Uint8Array): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request(
        events,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-wsrpc-session': session,
            'x-wsrpc-secret': secret,
          },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  return {
    stream,
    post,
    close: async () => {
      stream.destroy();
      await running.gateway.close({ timeoutMs: 1_000 });
    },
  };
}

async function opened(options: GatewayOptions<unknown> = {}): Promise<Session> {
  const session = await sseSession(options);
  cleanups.push(() => session.close());
  return session;
}

const echo = (id: number | string, params: unknown[] = ['ok']): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'echo', params });

/** The data of the stream's message events (not the session or close events). */
const messages = (stream: RawStream): string[] =>
  stream.events.filter((event) => event.event === 'message').map((event) => event.data);

describe('an event-stream POST whose body is not valid UTF-8', () => {
  it('is 202, then -32700 with data.reason on the stream, and the session goes on', async () => {
    const { stream, post } = await opened();
    expect(await post(bytes('{"jsonrpc":"2.0","id":1,"method":"ec', [0xff], 'ho"}'))).toBe(202);
    expect(await post(Buffer.from(echo(2)))).toBe(202);
    await stream.until((events) => events.some((event) => event.data.includes('"result"')));
    expect(messages(stream)).toEqual([
      INVALID_UTF8,
      JSON.stringify({ jsonrpc: '2.0', result: ['ok'], id: 2 }),
    ]);
  });

  it('is answered where and as a body with a syntax error is', async () => {
    const { stream, post } = await opened();
    expect(await post(Buffer.from('{"jsonrpc":"2.0","id":1,'))).toBe(202);
    await stream.until(() => messages(stream).length === 1);
    expect(JSON.parse(messages(stream)[0]!)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
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
    const { stream, post } = await opened();
    const body = bytes('{"jsonrpc":"2.0","id":1,"method":"echo","params":["a', bad, '"]}');
    expect(await post(body)).toBe(202);
    await stream.until(() => messages(stream).length === 1);
    expect(messages(stream)).toEqual([INVALID_UTF8]);
  });

  it('well-formed UTF-8 of one to four bytes a character is read as sent', async () => {
    const { stream, post } = await opened();
    const params = ['a', 'é', '€', '😀', '\u{10ffff}'];
    expect(await post(Buffer.from(echo(1, params)))).toBe(202);
    await stream.until(() => messages(stream).length === 1);
    expect(JSON.parse(messages(stream)[0]!)).toEqual({ jsonrpc: '2.0', result: params, id: 1 });
  });
});

describe('an event-stream POST is refused as invalid UTF-8 exactly when it is not UTF-8', () => {
  let session: Session;
  beforeAll(async () => {
    session = await sseSession({ limits: { ratePerSecond: 0 } });
  });
  afterAll(() => session.close());

  const strict = new TextDecoder('utf-8', { fatal: true });
  const isUtf8 = (data: Uint8Array): boolean => {
    try {
      strict.decode(data);
      return true;
    } catch {
      return false;
    }
  };
  const body = fc.oneof(
    fc.uint8Array({ maxLength: 32 }),
    fc.json().map((text) => Buffer.from(text)),
    fc
      .tuple(
        fc.string({ unit: 'binary', maxLength: 16 }),
        fc.nat(),
        fc.integer({ min: 0x80, max: 0xff }),
      )
      .map(([text, at, byte]) => {
        const out = Buffer.from(echo(1, [text]));
        const index = at % (out.length + 1);
        return Buffer.concat([out.subarray(0, index), Buffer.from([byte]), out.subarray(index)]);
      }),
  );

  let marker = 0;
  it('for any byte string', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (sent) => {
        // The body, then a call whose answer comes after whatever the body is answered with.
        const id = `marker-${++marker}`;
        const from = messages(session.stream).length;
        expect(await session.post(sent)).toBe(202);
        expect(await session.post(Buffer.from(echo(id)))).toBe(202);
        await session.stream.until((events) =>
          events.some((event) => event.data.includes(`"${id}"`)),
        );
        const answers = messages(session.stream).slice(from);
        expect(answers.filter((answer) => answer === INVALID_UTF8).length).toBe(
          isUtf8(sent) ? 0 : 1,
        );
      }),
      { numRuns: 200 },
    );
  });
});
