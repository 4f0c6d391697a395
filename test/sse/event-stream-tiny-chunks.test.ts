/**
 * The client's event-stream reader fed a stream in the smallest pieces a network gives (a server
 * writing a byte a TCP segment): what it holds of an event under way is about that event's
 * characters, not a string object per piece (some 17 bytes of heap a character, 35 past
 * U+00FF, which made `maxEventChars` hold many times its characters); the events read are the
 * same; and an event without end, a byte at a time from a real server, is given up at
 * `maxEventChars` (1009) with the connection let go.
 */
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { listenOnLoopback } from '../support/network.js';
import { EventStreamParser, sseSocket } from '../../src/client/sse-transport.js';
import type { SseEvent } from '../../src/client/sse-transport.js';
import type { WebSocketLike } from '../../src/transport/websocket-transport.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';
import { within } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * Heap (but for compiled code) per character that a parser holds after being fed `text`'s UTF-8
 * bytes `chunkBytes` at a time, decoded as the client decodes them (TextDecoder, streaming): the
 * least of two rounds, since what else the process allocates meanwhile only adds. Returns it
 * with the last round's parser, for the rest of the event.
 */
function heldPerCharacter(
  text: string,
  chunkBytes: number,
): { perCharacter: number; parser: EventStreamParser } {
  const bytes = new TextEncoder().encode(text);
  let least = Infinity;
  let parser = new EventStreamParser();
  for (let round = 0; round < 2; round++) {
    parser = new EventStreamParser();
    const decoder = new TextDecoder();
    fullGc();
    const before = heapUsedButCode();
    let events = 0;
    for (let at = 0; at < bytes.length; at += chunkBytes) {
      const chunk = decoder.decode(bytes.subarray(at, at + chunkBytes), { stream: true });
      events += parser.push(chunk)!.length;
    }
    fullGc();
    least = Math.min(least, (heapUsedButCode() - before) / text.length);
    expect(events).toBe(0);
  }
  return { perCharacter: least, parser };
}

describe('the event-stream parser fed tiny chunks', () => {
  // A flat string holds 1 byte a character (2 past U+00FF); a few bytes is what joining costs.
  const cases: [string, string, number][] = [
    ['one line of ASCII, 2 bytes a chunk', `data: ${'x'.repeat(200_000)}`, 2],
    ['one line past U+00FF, a byte a chunk', `data: ${'€'.repeat(100_000)}`, 1],
    ['many short data lines, a line a chunk', 'data:ab\n'.repeat(25_000), 8],
  ];
  for (const [name, text, chunkBytes] of cases) {
    it(`holds a few bytes a character of an event under way: ${name}`, () => {
      const { perCharacter, parser } = heldPerCharacter(text, chunkBytes);
      expect(perCharacter).toBeLessThan(3);
      // And the event, once it ends, is the text it came as.
      const [event] = parser.push('\n\n')!;
      const data = text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.replace(/^data: ?/, ''))
        .join('\n');
      expect(event).toEqual({ id: undefined, event: 'message', data });
    }, 60_000);
  }

  it('reads a stream fed a character at a time as the whole (CR, LF, CRLF, comments)', () => {
    const text =
      ': hi\r\nevent: session\r\ndata: {"a":1}\r\n\r\nid: 7\rdata: é€😀\rdata:\r\r' +
      'id: 8\ndata: two\ndata: lines\n\n';
    const whole = new EventStreamParser().push(text);
    const parser = new EventStreamParser();
    const chunked: SseEvent[] = [];
    for (const char of text) parser.push(char, chunked);
    expect(chunked).toEqual(whole);
    expect(chunked).toEqual([
      { id: undefined, event: 'session', data: '{"a":1}' },
      { id: '7', event: 'message', data: 'é€😀\n' },
      { id: '8', event: 'message', data: 'two\nlines' },
    ]);
  });
});

/** A server whose one event stream `write` feeds, a byte per write and per TCP segment. */
async function byteServer(
  write: (res: ServerResponse, byte: (text: string) => Promise<boolean>) => Promise<void>,
): Promise<{ url: string; socketClosed: Promise<void> }> {
  let closed!: () => void;
  const socketClosed = new Promise<void>((resolve) => (closed = resolve));
  const server: Server = createServer((req, res) => {
    const socket: Socket = req.socket;
    socket.setNoDelay(true);
    socket.once('close', closed);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    // Each byte its own write, the next in a later turn of the event loop, once this one has
    // gone to the kernel (a write's callback alone can come before any I/O is served, and the
    // client would never read): false once the connection is gone.
    const byte = async (text: string): Promise<boolean> => {
      for (const b of Buffer.from(text)) {
        if (socket.destroyed) return false;
        await new Promise<void>((resolve) => res.write(Buffer.from([b]), () => resolve()));
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      return !socket.destroyed;
    };
    void write(res, byte);
  });
  const listening = await listenOnLoopback(server);
  cleanups.push(listening.close);
  const { port } = listening;
  return { url: `http://127.0.0.1:${port}/rpc/events`, socketClosed };
}

const hello = JSON.stringify({ session: 's', secret: 't', lastEventId: 0 });

function socketFor(url: string, maxEventChars?: number): WebSocketLike {
  const Socket = sseSocket({
    eventsUrl: () => url,
    ...(maxEventChars === undefined ? {} : { maxEventChars }),
  }) as new (url: string) => WebSocketLike;
  const socket = new Socket('ws://127.0.0.1:9/rpc');
  cleanups.push(() => socket.close());
  return socket;
}

describe('SseSocket reading a real server that writes a byte at a time', () => {
  it('reads every message whole', async () => {
    const messages = ['{"jsonrpc":"2.0","method":"a","params":["é€😀"]}', '{"x":"two\\nlines"}'];
    const { url } = await byteServer(async (_res, byte) => {
      await byte(`event: session\ndata: ${hello}\n\n`);
      for (const [i, message] of messages.entries())
        await byte(`id: ${i + 1}\ndata: ${message}\n\n`);
    });
    const socket = socketFor(url);
    const received: string[] = [];
    await within(
      new Promise<void>((resolve) => {
        socket.onmessage = (event) => {
          received.push(String(event.data));
          if (received.length === messages.length) resolve();
        };
      }),
      'both messages read',
      50_000,
    );
    expect(received).toEqual(messages);
  }, 60_000);

  it('holds an event that ends within one chunk to maxEventChars as well', () => {
    const parser = new EventStreamParser(256);
    expect(parser.push(`data: ${'y'.repeat(200)}\n\n`)).toHaveLength(1);
    expect(parser.push(`data: ${'z'.repeat(300)}\n\n`)).toBeUndefined();
  });

  it('gives up an event without end at maxEventChars (1009) and lets the connection go', async () => {
    const { url, socketClosed } = await byteServer(async (_res, byte) => {
      await byte(`event: session\ndata: ${hello}\n\ndata: `);
      // One line that never ends, until the client lets go.
      while (await byte('z'));
    });
    const socket = socketFor(url, 256);
    const closed = await within(
      new Promise<{ code: number; reason: string }>((resolve) => (socket.onclose = resolve)),
      'the socket closed',
      50_000,
    );
    expect(closed).toEqual({ code: 1009, reason: 'an event over 256 characters' });
    await within(socketClosed, "the server saw the client's connection close", 50_000);
  }, 60_000);
});
