import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

/**
 * Read `stream` to its end as a slow consumer does: at most `chunkBytes` at a time, with a
 * timer turn between reads, so whatever writes to it has its output pile up behind the reader.
 * Resolves with everything read, once the stream has ended.
 */
export function readSlowly(stream: Readable, chunkBytes = 1024): Promise<string> {
  return new Promise((resolve, reject) => {
    const decoder = new StringDecoder('utf8');
    let text = '';
    /** True while nothing is buffered: the next 'readable' continues. */
    let waiting = false;
    const step = (): void => {
      waiting = false;
      const available = stream.readableLength;
      // read() with nothing buffered returns null and, at the end, lets 'end' fire.
      const chunk = (
        available > 0 ? stream.read(Math.min(chunkBytes, available)) : stream.read()
      ) as Buffer | string | null;
      if (chunk === null) {
        waiting = true;
        return;
      }
      text += typeof chunk === 'string' ? chunk : decoder.write(chunk);
      setTimeout(step, 1);
    };
    stream.on('readable', () => {
      if (waiting) step();
    });
    stream.once('end', () => resolve(text + decoder.end()));
    stream.once('error', reject);
    step();
  });
}
