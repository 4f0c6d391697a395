/**
 * An NDJSON line (TCP, stdio) that is not valid UTF-8 is not JSON text: that line is answered
 * -32700 Parse error (id null, `data.reason` "invalid UTF-8") and the connection goes on, as a
 * line with a syntax error does. It is never decoded with U+FFFD in place of the bad bytes and
 * handled as the message that decoding makes. The line bound counts bytes, and a character
 * cut between two chunks is read whole.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NdjsonTransport, createGateway, silentLogger } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import { within } from '../support/waiting.js';

const INVALID_UTF8 =
  '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":{"reason":"invalid UTF-8"}},"id":null}';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((part) => Buffer.from(part)));

async function echoGateway(options: GatewayOptions<unknown> = {}) {
  const gateway = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
  gateway.method('echo', (params) => params);
  const address = await gateway.listenTcp(0, '127.0.0.1');
  return { gateway, port: address.port };
}

interface Line {
  socket: Socket;
  lines: string[];
  /** Resolves with the lines once `count` have come (rejects if the socket closes first). */
  until(count: number): Promise<string[]>;
  closed: Promise<void>;
}

/** A plain TCP connection to `port`, collecting the lines it receives. */
async function lineClient(port: number): Promise<Line> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const lines: string[] = [];
  let rest = '';
  const waiters = new Set<() => void>();
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop()!;
    lines.push(...parts.filter((line) => line !== ''));
    for (const wake of waiters) wake();
  });
  socket.on('close', () => {
    for (const wake of waiters) wake();
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return {
    socket,
    lines,
    closed,
    async until(count) {
      while (lines.length < count) {
        if (socket.destroyed) throw new Error(`closed after ${JSON.stringify(lines)}`);
        await within(new Promise<void>((wake) => waiters.add(wake)), `line ${count}`);
      }
      return lines;
    },
  };
}

async function connected(port: number): Promise<Line> {
  const client = await lineClient(port);
  cleanups.push(() => client.socket.destroy());
  return client;
}

const echo = (id: number | string, params: unknown[] = ['ok']): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'echo', params });

describe('an NDJSON line that is not valid UTF-8', () => {
  it('is -32700 with data.reason, and the connection goes on', async () => {
    const { gateway, port } = await echoGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const client = await connected(port);
    client.socket.write(bytes('{"jsonrpc":"2.0","id":1,"method":"ec', [0xff], 'ho"}\n'));
    client.socket.write(`${echo(2)}\n`);
    const lines = await client.until(2);
    expect(lines[0]).toBe(INVALID_UTF8);
    expect(JSON.parse(lines[1]!)).toEqual({ jsonrpc: '2.0', result: ['ok'], id: 2 });
  });

  it('answers as a line with a syntax error is answered: id null, then on', async () => {
    const { gateway, port } = await echoGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const client = await connected(port);
    client.socket.write(`{"jsonrpc":"2.0","id":1,\n${echo(2)}\n`);
    const lines = await client.until(2);
    expect(JSON.parse(lines[0]!)).toMatchObject({ error: { code: -32700 }, id: null });
    expect(JSON.parse(lines[1]!)).toMatchObject({ result: ['ok'], id: 2 });
  });

  it.each([
    ['a lone continuation byte', [0x80]],
    ['0xff', [0xff]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['a sequence cut short by the newline', [0xe2, 0x82]],
  ])('%s inside a string param is -32700', async (_name, bad) => {
    const { gateway, port } = await echoGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const client = await connected(port);
    client.socket.write(
      bytes('{"jsonrpc":"2.0","id":1,"method":"echo","params":["a', bad, '"]}\n'),
    );
    client.socket.write(`${echo(2)}\n`);
    const lines = await client.until(2);
    expect(lines[0]).toBe(INVALID_UTF8);
    expect(JSON.parse(lines[1]!)).toMatchObject({ result: ['ok'], id: 2 });
  });

  it('a last line without its newline, cut short, is -32700 too', async () => {
    const { gateway, port } = await echoGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const client = await connected(port);
    client.socket.end(bytes(`${echo(1)}\n${echo(2)}`, [0xf0, 0x9f]));
    await within(client.closed, 'the close after the input ended');
    expect(client.lines).toEqual([
      JSON.stringify({ jsonrpc: '2.0', result: ['ok'], id: 1 }),
      INVALID_UTF8,
    ]);
  });

  it('counts bytes against maxMessageBytes: bad bytes at the bound are -32700, past it 1009', async () => {
    const limit = 1024;
    const { gateway, port } = await echoGateway({ limits: { maxMessageBytes: limit } });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const client = await connected(port);
    // A valid line of two-byte characters at the bound is read; bad bytes at the bound refused.
    const opening = '{"jsonrpc":"2.0","id":1,"method":"echo","params":["';
    const room = limit - opening.length - '"]}'.length;
    const text = 'é'.repeat(Math.floor(room / 2)) + 'x'.repeat(room % 2);
    client.socket.write(`${opening}${text}"]}\n`);
    client.socket.write(bytes(opening, Array<number>(room).fill(0xff), '"]}\n'));
    const lines = await client.until(2);
    expect(JSON.parse(lines[0]!)).toMatchObject({ result: [text], id: 1 });
    expect(lines[1]).toBe(INVALID_UTF8);
    // Bad bytes past the bound, no newline yet: refused as any line past it is.
    client.socket.write(Buffer.alloc(limit + 1, 0xff));
    await within(client.closed, 'the close');
    expect(JSON.parse(client.lines[2]!)).toMatchObject({
      error: { code: -32600, message: 'Message too large', data: { maxMessageBytes: limit } },
      id: null,
    });
  });
});

/** Feed `pieces` into an NdjsonTransport (a turn between them: each its own chunk); its lines. */
async function feed(
  pieces: readonly Uint8Array[],
): Promise<{ received: string[]; sent: string[] }> {
  const input = new PassThrough();
  const output = new PassThrough();
  const sent: string[] = [];
  output.setEncoding('utf8');
  output.on('data', (chunk: string) => sent.push(...chunk.split('\n').filter(Boolean)));
  const transport = new NdjsonTransport(input, output, { kind: 'stdio', maxLineBytes: 1 << 20 });
  const received: string[] = [];
  const closed = new Promise<void>((resolve) =>
    transport.listen({ receive: (line) => received.push(line), transportClosed: () => resolve() }),
  );
  for (const piece of pieces) {
    input.write(piece);
    await new Promise((resolve) => setImmediate(resolve));
  }
  input.end();
  await within(closed, 'the transport to close');
  return { received, sent };
}

/** `data` cut at the offsets in `cuts`. */
function cut(data: Uint8Array, cuts: number[]): Uint8Array[] {
  const at = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const offset of [...at, data.length]) {
    if (offset > from) pieces.push(data.subarray(from, offset));
    from = Math.max(from, offset);
  }
  return pieces;
}

const strict = new TextDecoder('utf-8', { fatal: true });
function isUtf8(data: Uint8Array): boolean {
  try {
    strict.decode(data);
    return true;
  } catch {
    return false;
  }
}

/** Bytes of a line (no newline): arbitrary, or UTF-8 text with a byte changed or inserted. */
const lineBytes = fc
  .oneof(
    fc.uint8Array({ maxLength: 24 }),
    fc.string({ unit: 'binary', maxLength: 12 }).map((text) => Buffer.from(text)),
    fc
      .tuple(
        fc.string({ unit: 'binary', maxLength: 12 }),
        fc.nat(),
        fc.integer({ min: 0x80, max: 0xff }),
      )
      .map(([text, at, byte]) => {
        const out = Buffer.from(text);
        const index = at % (out.length + 1);
        return Buffer.concat([out.subarray(0, index), Buffer.from([byte]), out.subarray(index)]);
      }),
  )
  .map((line) => Buffer.from(line.filter((byte) => byte !== 0x0a)));

describe('NDJSON: each line is refused exactly when it is not UTF-8', () => {
  it('for any lines of bytes, however cut into chunks (a character split between two included)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(lineBytes, { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (lines, cuts) => {
          const input = Buffer.concat(lines.flatMap((line) => [line, Buffer.from('\n')]));
          const { received, sent } = await feed(cut(input, cuts));
          const valid = lines.filter(isUtf8).map((line) => Buffer.from(line).toString('utf8'));
          const trimmed = valid.map((text) => text.replace(/^[ \t\r]+|[ \t\r]+$/g, ''));
          expect(received).toEqual(trimmed.filter(Boolean));
          expect(sent).toEqual(lines.filter((line) => !isUtf8(line)).map(() => INVALID_UTF8));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('NDJSON over TCP: the answer is the refusal exactly when the line is not UTF-8', () => {
  let port: number;
  let client: Line;
  const own: (() => unknown)[] = [];
  beforeAll(async () => {
    const running = await echoGateway({ limits: { ratePerSecond: 0 } });
    own.push(() => running.gateway.close({ timeoutMs: 1_000 }));
    port = running.port;
    client = await lineClient(port);
    own.push(() => client.socket.destroy());
  });
  afterAll(async () => {
    for (const cleanup of own.reverse()) await cleanup();
  });

  let marker = 0;
  it('for any byte string', async () => {
    await fc.assert(
      fc.asyncProperty(lineBytes, async (line) => {
        // The line, then a call whose answer comes after whatever the line is answered with.
        const id = `marker-${++marker}`;
        const from = client.lines.length;
        client.socket.write(Buffer.concat([line, Buffer.from(`\n${echo(id)}\n`)]));
        for (let count = from + 1; ; count++) {
          await client.until(count);
          if (client.lines[count - 1]!.includes(`"${id}"`)) break;
        }
        const answers = client.lines.slice(from, -1);
        expect(answers.includes(INVALID_UTF8)).toBe(!isUtf8(line));
        if (!isUtf8(line)) expect(answers).toEqual([INVALID_UTF8]);
      }),
      { numRuns: 200 },
    );
  });
});
