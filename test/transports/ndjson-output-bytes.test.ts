/**
 * What an NDJSON transport holds for its peer is counted in UTF-8 bytes, whatever the text: the
 * slow-consumer bound (maxBufferedBytes) and the node-wide output budget read it. A stream counts
 * a string it holds by its characters, a third of the bytes of text such as '€€€'.
 */
import { PassThrough, Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { NdjsonTransport } from '../../src/index.js';

/**
 * A transport whose peer reads nothing of its output: an output that, as a socket does, takes
 * strings as they are (decodeStrings false) and never finishes a write; `written` is what it got.
 */
function unread(): { transport: NdjsonTransport; written: (string | Buffer)[] } {
  const written: (string | Buffer)[] = [];
  const output = new Writable({
    decodeStrings: false,
    write(chunk: string | Buffer) {
      written.push(chunk);
    },
    writev(chunks) {
      for (const { chunk } of chunks) written.push(chunk as string | Buffer);
    },
  });
  const transport = new NdjsonTransport(new PassThrough(), output, {
    kind: 'stdio',
    maxLineBytes: 1024,
  });
  transport.listen({ receive: () => undefined, transportClosed: () => undefined });
  return { transport, written };
}

it.each([
  ['ASCII', 'a'.repeat(100_000), 100_002],
  ['three bytes a character', '€'.repeat(100_000), 300_002],
  ['four bytes a pair', '😀'.repeat(50_000), 200_002],
])('%s: counted in bytes, and written as they are', async (_, text, bytes) => {
  const { transport, written } = unread();
  const line = JSON.stringify(text);
  transport.send(line);
  await new Promise((resolve) => setImmediate(resolve)); // the turn's writes flushed
  expect(transport.bufferedAmount).toBe(bytes + 1);
  expect(transport.budgetBytes).toBe(bytes + 1);
  expect(written.map((chunk) => chunk.toString()).join('')).toBe(`${line}\n`);
});
