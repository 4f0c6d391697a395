// Files read once and served from memory: the demo page and gateway mode's `static` folder.
// No path from a request ever reaches the file system: a request's path is only looked up.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname } from 'node:path';

/** One file as served. */
export interface StaticAsset {
  readonly body: Buffer;
  readonly type: string;
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
};

/** The Content-Type a file is served with, from its extension. */
export function contentTypeOf(file: string): string {
  return TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * A URL path as the assets are keyed: each segment decoded and encoded again with
 * encodeURIComponent, so that `/logo@2x.png` and `/logo%402x.png` name the same file however the
 * browser escapes it. A segment that is not valid percent-encoding names no file.
 */
function canonicalPath(path: string): string {
  try {
    return path
      .split('/')
      .map((segment) => encodeURIComponent(decodeURIComponent(segment)))
      .join('/');
  } catch {
    return '';
  }
}

/**
 * An `httpHandler` answering GET and HEAD for the URL paths of `assets` (the query string cut
 * off, the path compared as canonicalPath writes it); false for anything else, which the gateway answers with 404.
 */
export function serveAssets(
  assets: ReadonlyMap<string, StaticAsset>,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const asset = assets.get(canonicalPath((req.url ?? '/').split('?', 1)[0]!));
    if (!asset) return false;
    res.writeHead(200, {
      'Content-Type': asset.type,
      'Content-Length': asset.body.length,
      'Cache-Control': 'no-cache',
      'X-Content-Type-Options': 'nosniff',
    });
    res.end(req.method === 'HEAD' ? undefined : asset.body);
    return true;
  };
}
