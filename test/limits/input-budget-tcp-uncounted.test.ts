/**
 * A TCP (NDJSON) connection's input budget is charged every byte it sends: a line's text its
 * UTF-8 bytes (at least messageCostBytes), and what no line's text stands for besides: a line
 * that is not UTF-8, the JSON whitespace trimmed off a line, lines of nothing but whitespace,
 * the newlines. Otherwise a peer could send any amount of those without ever being paused.
 *
 * The splitter's side, as a property: for any input cut into any chunks, the bytes of its
 * complete lines are exactly the text lines' UTF-8 bytes plus what it reports uncounted. The
 * transport's side, on a real socket: 80 KiB of each kind (ten times the burst) pauses reading,
 * where charging only the lines' text would not, and the line after them is still answered.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { createGateway } from '../../src/server/gateway.js';
import { silentLogger } from '../../src/peer/logger.js';
import { ByteLineSplitter, NOT_UTF8 } from '../../src/transport/ndjson-byte-lines.js';
import { waitUntil } from '../support/waiting.js';
import { watchTcpPauses } from './tcp-pauses.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('ByteLineSplitter', () => {
  /** One line's bytes: JSON-ish text, whitespace around it, or bytes that are not UTF-8. */
  const lineBytes = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => Buffer.from(s.replace(/\n/g, ''))),
    fc
      .tuple(fc.constantFrom(' ', '\t', '\r', ''), fc.string({ maxLength: 10 }))
      .map(([ws, s]) => Buffer.from(`${ws}${ws}${s.replace(/\n/g, '')}${ws}`)),
    fc.constant(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])),
    fc.constant(Buffer.from('   ')),
  );

  it('accounts for every byte of the lines it ends: their text, or uncounted', () => {
    fc.assert(
      fc.property(
        fc.array(lineBytes, { maxLength: 12 }),
        fc.array(fc.nat(40), { maxLength: 6 }),
        (lines, cuts) => {
          const input = Buffer.concat(lines.flatMap((line) => [line, Buffer.from('\n')]));
          const splitter = new ByteLineSplitter(1 << 20);
          const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort(
            (a, b) => a - b,
          );
          let from = 0;
          let textBytes = 0;
          let notUtf8 = 0;
          for (const to of [...points, input.length]) {
            for (const line of splitter.push(input.subarray(from, to))) {
              if (typeof line === 'string') textBytes += Buffer.byteLength(line);
              else if (line === NOT_UTF8) notUtf8++;
            }
            from = to;
          }
          expect(splitter.heldBytes).toBe(0);
          expect(textBytes + splitter.takeUncounted()).toBe(input.length);
          expect(splitter.takeUncounted()).toBe(0);
          expect(notUtf8).toBe(
            lines.filter((line) => !Buffer.from(line.toString()).equals(line)).length,
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});

const LINES = 20;
const LINE_BYTES = 4000;

describe('a TCP connection sending bytes no line text stands for', () => {
  it.each([
    ['lines that are not UTF-8', () => Buffer.alloc(LINE_BYTES, 0xff)],
    [
      'a call padded with whitespace',
      () => Buffer.from(`{"jsonrpc":"2.0","method":"echo","params":[0]}`.padEnd(LINE_BYTES, ' ')),
    ],
    ['lines of whitespace alone', () => Buffer.alloc(LINE_BYTES, 0x20)],
  ])('is paused for %s, and the line after them is answered', async (_name, line) => {
    const gateway = createGateway({
      logger: silentLogger,
      heartbeatIntervalMs: 0,
      // The burst is 2 × maxMessageBytes: 8 KiB, two of these lines; 20 lines are 80 KiB.
      limits: {
        maxMessageBytes: 4096,
        ratePerSecond: 0,
        bytesPerSecond: 32 * 1024,
        bytesPerSecondPerIp: 0,
      },
    });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    gateway.method('echo', (params) => (params as [number])[0]);
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const socket: Socket = connect(port, '127.0.0.1');
    cleanups.push(() => socket.destroy());
    await new Promise((resolve) => socket.once('connect', resolve));
    const pauses = await watchTcpPauses(gateway);
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    for (let i = 0; i < LINES; i++) socket.write(Buffer.concat([line(), Buffer.from('\n')]));
    socket.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'echo', params: [7] })}\n`,
    );
    await waitUntil(() => text.includes('"id":"last"'), 'the last line answered', 30_000);
    expect(pauses.count()).toBeGreaterThan(0);
  });
});
