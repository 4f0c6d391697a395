import type { IncomingMessage } from 'node:http';

/** The text of a response body, up to `maxBytes` (the rest is read and dropped). */
export function readBody(response: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const text = (): string => Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8');
    response.on('data', (chunk: Buffer) => {
      if (size >= maxBytes) return;
      chunks.push(chunk);
      size += chunk.length;
    });
    response.once('end', () => resolve(text()));
    response.once('error', reject);
    // Cut off before the end: keep what arrived (resolving twice is a no-op).
    response.once('close', () => resolve(text()));
  });
}
