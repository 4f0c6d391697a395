/**
 * With `binaryJsonFrames: "text"`, a binary WebSocket frame is read as JSON text: one whose
 * bytes are not valid UTF-8 closes the connection 1007, as a text frame that is not does
 * (RFC 6455, 8.1), never decoded with U+FFFD in place of the bad bytes and handled as the
 * message that decoding makes.
 */
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import type { RunningGateway } from '../support/gateway.js';
import { within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => Buffer.from(part)));

async function echoGateway(resources: Resources): Promise<RunningGateway> {
  const running = await resources.gateway({
    binaryJsonFrames: 'text',
    // A connection per run of the property, from one address: no connection rate to refuse one.
    limits: { ratePerSecond: 0, connectionsPerSecondPerIp: 0 },
  });
  running.gateway.method('echo', (params) => params);
  return running;
}

/** The next text of `socket` (its message decoded), within the usual bound. */
function nextMessage(socket: WebSocket): Promise<string> {
  return within(
    new Promise<string>((resolve) =>
      socket.once('message', (data: Buffer) => resolve(data.toString('utf8'))),
    ),
    'a message',
  );
}

const echo = (id: number, params: unknown[] = ['ok']): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'echo', params });

describe('binaryJsonFrames "text": a binary frame that is not valid UTF-8', () => {
  it('closes the connection 1007, as a text frame that is not does', async () => {
    const { url } = await echoGateway(res);
    const binary = await openSocket(res, url);
    const closedBinary = closeOf(binary);
    binary.send(bytes('{"jsonrpc":"2.0","id":1,"method":"ec', [0xff], 'ho"}'), { binary: true });
    expect(await within(closedBinary, 'the close')).toEqual({
      code: 1007,
      reason: 'invalid UTF-8',
    });

    const text = await openSocket(res, url, undefined, { skipUTF8Validation: true });
    const closedText = closeOf(text);
    text.send(bytes('{"jsonrpc":"2.0","id":1,"method":"ec', [0xff], 'ho"}'), { binary: false });
    expect((await within(closedText, 'the close')).code).toBe(1007);
  });

  it.each([
    ['a lone continuation byte', [0x80]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ])('%s inside a string param closes 1007', async (_name, bad) => {
    const { url } = await echoGateway(res);
    const socket = await openSocket(res, url);
    const closed = closeOf(socket);
    socket.send(bytes('{"jsonrpc":"2.0","id":1,"method":"echo","params":["', bad, '"]}'), {
      binary: true,
    });
    expect((await within(closed, 'the close')).code).toBe(1007);
  });

  it('a sequence cut short at the end of the frame closes 1007', async () => {
    const { url } = await echoGateway(res);
    const socket = await openSocket(res, url);
    const closed = closeOf(socket);
    socket.send(bytes(echo(1), [0xe2, 0x82]), { binary: true });
    expect((await within(closed, 'the close')).code).toBe(1007);
  });

  it('well-formed UTF-8 of one to four bytes a character is read as sent', async () => {
    const { url } = await echoGateway(res);
    const socket = await openSocket(res, url);
    const params = ['a', 'é', '€', '😀', '\u{10ffff}'];
    const reply = nextMessage(socket);
    socket.send(Buffer.from(echo(1, params)), { binary: true });
    expect(JSON.parse(await reply)).toEqual({ jsonrpc: '2.0', result: params, id: 1 });
  });
});

describe('binaryJsonFrames "text": closed 1007 exactly when the frame is not UTF-8', () => {
  const own = new Resources();
  let running: RunningGateway;
  beforeAll(async () => {
    running = await echoGateway(own);
  });
  afterAll(() => own.cleanup());

  const strict = new TextDecoder('utf-8', { fatal: true });
  const isUtf8 = (data: Uint8Array): boolean => {
    try {
      strict.decode(data);
      return true;
    } catch {
      return false;
    }
  };
  const frame = fc.oneof(
    fc.uint8Array({ maxLength: 32 }),
    fc.string({ unit: 'binary', maxLength: 16 }).map((text) => Buffer.from(text)),
    fc
      .tuple(
        fc.string({ unit: 'binary', maxLength: 16 }),
        fc.nat(),
        fc.integer({ min: 0x80, max: 0xff }),
      )
      .map(([text, at, byte]) => {
        const out = Buffer.from(text);
        const index = at % (out.length + 1);
        return Buffer.concat([out.subarray(0, index), Buffer.from([byte]), out.subarray(index)]);
      }),
  );

  it('for any byte string', async () => {
    await fc.assert(
      fc.asyncProperty(frame, async (sent) => {
        const socket = await openSocket(own, running.url);
        const closed = closeOf(socket);
        // The frame, then a call: answered only if the frame left the connection open.
        const answered = new Promise<boolean>((resolve) => {
          socket.on('message', (data: Buffer) => {
            if ((JSON.parse(data.toString('utf8')) as { id?: unknown }).id === 'marker') {
              resolve(true);
            }
          });
          void closed.then(() => resolve(false));
        });
        socket.send(sent, { binary: true });
        socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'marker', method: 'echo' }));
        const open = await within(answered, 'the marker answered or the close');
        expect(open).toBe(isUtf8(sent));
        if (!open) expect((await closed).code).toBe(1007);
        socket.terminate();
      }),
      { numRuns: 100 },
    );
  });
});
