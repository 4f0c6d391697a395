/**
 * Newline-delimited JSON framing over real streams: however the bytes are cut into chunks, the
 * same lines come out as from one write, and a long line sent in small chunks is scanned once,
 * not once per chunk (counted, not timed).
 */
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { NdjsonTransport } from '../../src/index.js';

afterEach(() => {
  vi.restoreAllMocks();
});

interface Fed {
  lines: string[];
  transport: NdjsonTransport;
  /** 'data' events the transport's input emitted: the chunks it was handed. */
  chunks: number;
}

/**
 * Write `pieces` one by one into an NdjsonTransport's input (a turn between writes, so each
 * arrives as its own chunk), end it, and collect the lines the transport hands on.
 */
async function feed(pieces: readonly Uint8Array[], maxLineBytes = 16 * 1024 * 1024): Promise<Fed> {
  const input = new PassThrough();
  const output = new PassThrough();
  output.resume();
  const transport = new NdjsonTransport(input, output, { kind: 'stdio', maxLineBytes });
  const lines: string[] = [];
  const closed = new Promise<void>((resolve) =>
    transport.listen({ receive: (line) => lines.push(line), transportClosed: () => resolve() }),
  );
  let chunks = 0;
  input.on('data', () => chunks++);
  for (const piece of pieces) {
    input.write(piece);
    await new Promise((resolve) => setImmediate(resolve));
  }
  input.end();
  await closed;
  return { lines, transport, chunks };
}

/**
 * What the framing promises: lines cut at '\n', trimmed of JSON whitespace (space, tab, CR: no
 * other), those that held nothing else dropped, a last line without '\n' kept.
 */
function expectedLines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.replace(/^[ \t\r]+|[ \t\r]+$/g, ''))
    .filter((line) => line.length > 0);
}

/** `bytes` cut at the (sorted, distinct) offsets in `cuts`. */
function cut(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (const offset of [...at, bytes.length]) {
    if (offset > from) pieces.push(bytes.subarray(from, offset));
    from = Math.max(from, offset);
  }
  return pieces;
}

/**
 * Lines of JSON-ish text: any characters but '\n' (multi-byte ones, '\r', spaces included), often
 * with whitespace at the ends, JSON's or another kind String.prototype.trim would also take.
 */
const edgeSpace = fc.constantFrom(' ', '\t', '\r', '\u00a0', '\ufeff', '\u000b', '\u2028', '');
const lineText = fc
  .tuple(edgeSpace, fc.string({ unit: 'binary', maxLength: 40 }), edgeSpace)
  .map(([before, text, after]) => `${before}${text}${after}`.replace(/\n/g, ' '));

describe('NDJSON framing', () => {
  it('any cut of any input into chunks gives the lines one write gives', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(lineText, { maxLength: 12 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 30 }),
        async (lineTexts, trailingNewline, cuts) => {
          const text = lineTexts.join('\n') + (trailingNewline ? '\n' : '');
          const bytes = Buffer.from(text, 'utf8');
          const whole = await feed(bytes.length > 0 ? [bytes] : []);
          const chunked = await feed(cut(bytes, cuts));
          expect(whole.lines).toEqual(expectedLines(text));
          expect(chunked.lines).toEqual(whole.lines);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a 1 MiB line sent 200 bytes at a time is scanned a bounded number of times per byte', async () => {
    // 1 MiB of UTF-8, two bytes a character: a chunk boundary may fall inside a character.
    const line = `{"jsonrpc":"2.0","method":"m","params":["${'é'.repeat(512 * 1024 - 32)}"]}`;
    const bytes = Buffer.from(`${line}\n{"jsonrpc":"2.0","method":"n"}\n`, 'utf8');
    const pieces = cut(
      bytes,
      Array.from({ length: Math.ceil(bytes.length / 200) }, (_, i) => i * 200),
    );
    // Measuring a string's UTF-8 size reads all of it: count what is measured, whoever measures.
    let measured = 0;
    const byteLength = Buffer.byteLength.bind(Buffer);
    vi.spyOn(Buffer, 'byteLength').mockImplementation((value, encoding) => {
      measured += typeof value === 'string' ? value.length : value.byteLength;
      return byteLength(value, encoding);
    });

    const { lines, transport, chunks } = await feed(pieces);

    expect(chunks).toBe(pieces.length); // it was handed ~10 000 small chunks, not a few large ones
    expect(lines).toEqual([line, '{"jsonrpc":"2.0","method":"n"}']);
    const characters = bytes.toString('utf8').length;
    // Linear: each character is searched for '\n' once and measured at most twice (while
    // held, and as a whole line against maxLineBytes). Re-scanning what is held on every
    // chunk would be ~5 000 times the input here.
    expect(transport.lines.scanned).toBeLessThanOrEqual(2 * characters);
    expect(measured).toBeLessThanOrEqual(3 * characters);
  });
});
