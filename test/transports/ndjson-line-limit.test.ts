/**
 * `tcpSocket` and `streamSocket` (the client's newline-delimited JSON sockets) hold at most
 * `maxLineBytes` of a line (default 1 MiB, the gateway's maxMessageBytes): past it, what is held
 * is dropped and the connection closes with 1009 'message too large', however the line is cut.
 */
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { streamSocket, tcpSocket } from '../../src/transport/ndjson-socket.js';
import type { WebSocketLike } from '../../src/transport/websocket-transport.js';
import { within } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Closed {
  code: number;
  reason: string;
}

/** A net server that writes `text` in 64 KiB pieces to each connection and never closes it. */
async function writingServer(text: string): Promise<{ url: string; ended: Promise<void> }> {
  let sawEnd!: () => void;
  const ended = new Promise<void>((resolve) => (sawEnd = resolve));
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sawEnd());
    socket.resume();
    let at = 0;
    const pump = (): void => {
      while (at < text.length && !socket.destroyed) {
        const ok = socket.write(text.slice(at, at + 65_536));
        at += 65_536;
        if (!ok) return void socket.once('drain', pump);
      }
    };
    pump();
  });
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`, ended };
}

/** Open a tcpSocket to `url`; its messages and how it closed. */
function openTcp(url: string, options: { maxLineBytes?: number } = {}) {
  const TcpSocket = tcpSocket(options);
  const socket = new TcpSocket(url) as WebSocketLike;
  cleanups.push(() => socket.close());
  const messages: string[] = [];
  socket.onmessage = (event) => messages.push(event.data as string);
  const closed = new Promise<Closed>(
    (resolve) => (socket.onclose = (event) => resolve({ code: event.code, reason: event.reason })),
  );
  return { messages, closed };
}

const MiB = 1024 * 1024;
const opening = '{"jsonrpc":"2.0","method":"n","params":["';

describe('tcpSocket: maxLineBytes', () => {
  it('by default, a line past 1 MiB with no newline yet closes the connection with 1009', async () => {
    const server = await writingServer(`${opening}${'x'.repeat(MiB)}`);
    const { messages, closed } = openTcp(server.url);
    expect(await within(closed, 'the close')).toEqual({ code: 1009, reason: 'message too large' });
    expect(messages).toEqual([]);
    await within(server.ended, 'the server to see the connection end');
  });

  it('a line at the limit is delivered; a whole line past it closes with 1009', async () => {
    const limit = 64 * 1024;
    const atLimit = `${opening}${'é'.repeat((limit - opening.length - 2) / 2)}"]}`;
    expect(Buffer.byteLength(atLimit)).toBe(limit);
    const server = await writingServer(`${atLimit}\n${atLimit}é\n`);
    const { messages, closed } = openTcp(server.url, { maxLineBytes: limit });
    expect(await within(closed, 'the close')).toEqual({ code: 1009, reason: 'message too large' });
    expect(messages).toEqual([atLimit]);
  });
});

/** A line with no whitespace at its ends (the splitter trims), of characters of 1 to 4 UTF-8 bytes. */
const lineArb = fc
  .array(fc.constantFrom('a', 'b', '{', '"', 'é', '€', '😀'), { maxLength: 24 })
  .map((chars) => chars.join(''));

describe('streamSocket: maxLineBytes, however the input is cut (property)', () => {
  it('delivers the lines up to the first one past the limit, then closes with 1009', async () => {
    const limit = 12;
    await fc.assert(
      fc.asyncProperty(
        fc.array(lineArb, { maxLength: 8 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (lines, lastEnded, cuts) => {
          const text = lines.join('\n') + (lastEnded && lines.length > 0 ? '\n' : '');
          const firstOver = lines.findIndex((line) => Buffer.byteLength(line) > limit);
          const kept = (firstOver < 0 ? lines : lines.slice(0, firstOver)).filter(Boolean);
          const { messages, closed } = await feed(text, cuts, limit);
          expect(messages).toEqual(kept);
          expect((await closed).code).toBe(firstOver < 0 ? 1006 : 1009);
        },
      ),
      { numRuns: 150 },
    );
  });
});

/** Write `text` to a streamSocket cut at `cuts` (by code point), end it; its messages and close. */
async function feed(text: string, cuts: number[], maxLineBytes: number) {
  const input = new PassThrough();
  const output = new PassThrough();
  output.resume();
  const StreamSocket = streamSocket(input, output, { maxLineBytes });
  const socket = new StreamSocket('') as WebSocketLike;
  const messages: string[] = [];
  socket.onmessage = (event) => messages.push(event.data as string);
  const closed = new Promise<Closed>(
    (resolve) => (socket.onclose = (event) => resolve({ code: event.code, reason: event.reason })),
  );
  await new Promise((resolve) => (socket.onopen = resolve));
  const points = [...text];
  const at = [...new Set(cuts.map((cut) => cut % (points.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const cut of [...at, points.length]) {
    if (cut > from && !input.destroyed) input.write(points.slice(from, cut).join(''));
    from = Math.max(from, cut);
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (!input.destroyed) input.end();
  const result = await within(closed, 'the close');
  return { messages, closed: Promise.resolve(result) };
}
