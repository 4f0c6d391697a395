import type { IncomingMessage } from 'node:http';

/** Most of a refusal's body read (a refused upgrade or POST): it is quoted, shortened, in one line. */
export const MAX_REFUSAL_BODY = 4096;
/** Longest a refusal's body is waited for: what came by then is quoted. */
export const REFUSAL_BODY_MS = 2_000;

/** A response body as read. */
export interface Body {
  /** Its bytes, at most `maxBytes`. */
  bytes: Buffer;
  /** More came than `maxBytes`: `bytes` holds the first `maxBytes`, the rest was not read. */
  overflowed: boolean;
}

/**
 * A response body, up to `maxBytes`, and for at most `maxMs` when given. Once more than
 * `maxBytes` came, or `maxMs` ran out, the response is destroyed (its socket with it) and what
 * came so far is the body: a server cannot hold the CLI with a body that never ends.
 */
export function readBody(
  response: IncomingMessage,
  maxBytes: number,
  maxMs?: number,
): Promise<Body> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const timer = maxMs === undefined ? undefined : setTimeout(() => settle(false, true), maxMs);
    function settle(overflowed: boolean, cut: boolean): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      response.off('data', onData);
      const bytes = Buffer.concat(chunks).subarray(0, maxBytes);
      resolve({ bytes, overflowed });
      if (cut) response.destroy();
    }
    function onData(chunk: Buffer): void {
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) settle(true, true);
    }
    response.on('data', onData);
    response.once('end', () => settle(false, false));
    response.once('error', (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    });
    // Cut off before the end: keep what arrived.
    response.once('close', () => settle(false, false));
  });
}
