// Files read once and served from memory: the demo page and gateway mode's `static` folder.
// No path from a request ever reaches the file system: a request's path is only looked up.
import { createHash } from 'node:crypto';
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
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  // WebAssembly.instantiateStreaming takes no other type.
  '.wasm': 'application/wasm',
  '.webmanifest': 'application/manifest+json',
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

/** A strong ETag of `body`: its SHA-256, base64url. */
function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url')}"`;
}

/**
 * Whether an If-None-Match header names `etag` (or is `*`). Compared weakly, as RFC 9110
 * 13.1.2 has it for If-None-Match: `W/"x"` names `"x"`.
 */
function noneMatchNames(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  for (const [tag] of header.matchAll(/\*|(?:W\/)?"[^"]*"/g)) {
    if (tag === '*' || tag.replace(/^W\//, '') === etag) return true;
  }
  return false;
}

/**
 * An `httpHandler` answering GET and HEAD for the URL paths of `assets` (the query string cut
 * off, the path compared as canonicalPath writes it); false for anything else, which the gateway
 * answers with 404. Each asset has a strong ETag (its bytes' hash, computed here, once); a
 * request whose If-None-Match names it is answered 304 without a body. Cache-Control: no-cache
 * has the browser ask each time, and the ETag makes the asking cheap.
 */
export function serveAssets(
  assets: ReadonlyMap<string, StaticAsset>,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  // The same body under two paths (index.html at `/`) is hashed once.
  const tags = new Map<Buffer, string>();
  const served = new Map<string, StaticAsset & { readonly etag: string }>();
  for (const [path, asset] of assets) {
    let etag = tags.get(asset.body);
    if (etag === undefined) tags.set(asset.body, (etag = etagOf(asset.body)));
    served.set(path, { ...asset, etag });
  }
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const asset = served.get(canonicalPath((req.url ?? '/').split('?', 1)[0]!));
    if (!asset) return false;
    const common = {
      ETag: asset.etag,
      'Cache-Control': 'no-cache',
      'X-Content-Type-Options': 'nosniff',
    };
    if (noneMatchNames(req.headers['if-none-match'], asset.etag)) {
      res.writeHead(304, common);
      res.end();
      return true;
    }
    res.writeHead(200, {
      'Content-Type': asset.type,
      'Content-Length': asset.body.length,
      ...common,
    });
    res.end(req.method === 'HEAD' ? undefined : asset.body);
    return true;
  };
}
