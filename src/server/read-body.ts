import type { IncomingMessage, ServerResponse } from 'node:http';

/** How a request body is read: at most `maxBytes`, within `timeoutMs`. */
export interface BodyLimits {
  maxBytes: number;
  timeoutMs: number;
  /** Told of a body that did not arrive within `timeoutMs` (answered 408 and closed). */
  timedOut?: () => void;
  /** Told the bytes read so far after each piece (what the caller counts while it is held). */
  received?: (bytes: number) => void;
  /**
   * Reading stops when it aborts: the promise resolves undefined at once, and the caller
   * answers the request (refuseUnread), whose body is then discarded unread.
   */
  signal?: AbortSignal;
}

/** A plain-text reply that closes the connection (the body was not read to its end). */
function refuse(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    connection: 'close',
    ...headers,
  });
  res.end(text);
}

/**
 * Answer a request whose body was left unread (its reading stopped by BodyLimits.signal), and
 * close its connection; what is left of the body is discarded as it comes.
 */
export function refuseUnread(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  text: string,
  headers?: Record<string, string>,
): void {
  refuse(res, status, text, headers);
  req.resume();
}

/**
 * A request's whole body, bounded in size (413) and time (408); undefined when there is none to
 * answer: the client left, or the 413 or 408 has been sent. A declared Content-Length over the
 * bound is refused before anything is read. Read as text with strictUtf8 (protocol/invalid-utf8.ts), which refuses bytes
 * that are not UTF-8 (answered INVALID_UTF8_REPLY), never reads them as U+FFFD.
 */
export function readBodyBytes(
  req: IncomingMessage,
  res: ServerResponse,
  limits: BodyLimits,
): Promise<Buffer | undefined> {
  if (req.destroyed || res.destroyed || req.socket.destroyed) return Promise.resolve(undefined);
  const { maxBytes, timeoutMs, received, signal } = limits;
  if (signal?.aborted) return Promise.resolve(undefined);
  const tooLarge = (): void => {
    refuse(res, 413, `Request body larger than ${maxBytes} bytes\n`);
    req.resume();
  };
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    tooLarge();
    return Promise.resolve(undefined);
  }
  // One buffer, grown by doubling, that each piece is copied into: a body trickled in a byte a
  // segment would otherwise hold an object of some 64 bytes per byte until it ends.
  const start = Number.isSafeInteger(declared) && declared > 0 ? Math.min(declared, 16_384) : 0;
  let body = Buffer.allocUnsafe(start);
  return new Promise((resolve) => {
    let size = 0;
    const done = (body: Buffer | undefined): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', stop);
      resolve(body);
    };
    const stop = (): void => {
      req.removeAllListeners('data');
      done(undefined);
    };
    signal?.addEventListener('abort', stop);
    // A body trickling in holds the request open: it gets timeoutMs, then 408.
    const timer = setTimeout(() => {
      req.removeAllListeners('data');
      limits.timedOut?.();
      refuse(res, 408, `Request body not received within ${timeoutMs} ms\n`);
      req.resume();
      done(undefined);
    }, timeoutMs);
    req.on('data', (chunk: Buffer) => {
      const end = size + chunk.length;
      if (end > maxBytes) {
        req.removeAllListeners('data');
        tooLarge();
        done(undefined);
        return;
      }
      if (end > body.length) {
        const grown = Buffer.allocUnsafe(Math.min(maxBytes, Math.max(end, body.length * 2)));
        body.copy(grown, 0, 0, size);
        body = grown;
      }
      chunk.copy(body, size);
      size = end;
      received?.(size);
    });
    req.on('end', () => done(body.subarray(0, size)));
    req.on('error', () => done(undefined));
    req.on('close', () => done(undefined));
  });
}
