import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/** URL path -> file, relative to this module once built (dist/demo/). Nothing else is served. */
const ROUTES: Record<string, string> = {
  '/': '../demo-web/index.html',
  '/index.html': '../demo-web/index.html',
  '/style.css': '../demo-web/style.css',
  '/app.js': '../demo-web/app.js',
  '/app.js.map': '../demo-web/app.js.map',
  '/client.js': '../browser/client.js',
  '/client.js.map': '../browser/client.js.map',
};

interface Asset {
  body: Buffer;
  type: string;
}

/**
 * The gateway's `httpHandler` for the demo page: a fixed set of files, read once at start
 * (a handful of small files; no path from the request ever reaches the file system).
 * Returns false for anything else, which the gateway answers with 404.
 */
export function demoPageHandler(): {
  handler: (req: IncomingMessage, res: ServerResponse) => boolean;
  missing: string[];
} {
  const assets = new Map<string, Asset>();
  const missing: string[] = [];
  for (const [path, file] of Object.entries(ROUTES)) {
    const location = fileURLToPath(new URL(file, import.meta.url));
    try {
      const type = TYPES[location.slice(location.lastIndexOf('.'))] ?? 'application/octet-stream';
      assets.set(path, { body: readFileSync(location), type });
    } catch {
      missing.push(location);
    }
  }
  const handler = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const asset = assets.get((req.url ?? '/').split('?', 1)[0]!);
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
  return { handler, missing };
}
