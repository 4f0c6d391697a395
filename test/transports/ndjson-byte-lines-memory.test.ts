/**
 * A line of newline-delimited JSON read a few bytes at a time holds about its bytes, not a
 * Buffer per read: the bound on the unfinished line (maxMessageBytes, and maxBufferedBytesTotal
 * across connections) counts bytes, and a peer that drips a line byte by byte (a TCP segment, a
 * TLS record each) must not make each counted byte cost hundreds. The lines read whole are the
 * same as when read at once.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { ByteLineSplitter } from '../../src/transport/ndjson-byte-lines.js';
import { fullGc } from '../support/heap.js';

const used = (): number => {
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
};

it('a line dripped a byte per read holds about its bytes', () => {
  const BYTES = 100_000;
  const splitters: ByteLineSplitter[] = [];
  fullGc();
  const before = used();
  for (let s = 0; s < 4; s++) {
    const splitter = new ByteLineSplitter(1024 * 1024);
    // Each read a Buffer of its own, as a socket's are.
    for (let i = 0; i < BYTES; i++) splitter.push(Buffer.from(i === 0 ? '[' : '1'));
    expect(splitter.heldBytes).toBe(BYTES);
    splitters.push(splitter);
  }
  fullGc();
  const perByte = (used() - before) / (4 * BYTES);
  // Held as it came (a Buffer per read), each byte cost over a hundred.
  expect(perByte).toBeLessThan(4);
  expect(splitters).toHaveLength(4);
});

it('model: however the bytes are cut, the lines are those of the whole text', () => {
  // One- to four-byte characters: a cut may fall inside any of them.
  const line = fc
    .array(fc.constantFrom('a', 'z', '0', ' ', 'é', '€', '😀'), { maxLength: 40 })
    .map((chars) => chars.join(''));
  fc.assert(
    fc.property(
      fc.array(line, { maxLength: 8 }),
      fc.array(fc.integer({ min: 1, max: 2_000 }), { minLength: 1, maxLength: 30 }),
      (lines, cuts) => {
        const text = lines.map((l) => `"${l}"\n`).join('');
        const bytes = Buffer.from(text);
        const splitter = new ByteLineSplitter(1024 * 1024);
        const got: unknown[] = [];
        let at = 0;
        for (let i = 0; at < bytes.length; i++) {
          const size =
            cuts[i % cuts.length]! % 7 === 0
              ? cuts[i % cuts.length]!
              : (cuts[i % cuts.length]! % 5) + 1;
          got.push(...splitter.push(Buffer.from(bytes.subarray(at, at + size))));
          at += size;
        }
        const last = splitter.end();
        if (last !== undefined) got.push(last);
        expect(got).toEqual(lines.map((l) => `"${l}"`));
      },
    ),
    { numRuns: 300 },
  );
});
