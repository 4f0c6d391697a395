import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { contentTypeOf, serveAssets } from '../src/server/static-assets.js';
import type { StaticAsset } from '../src/server/static-assets.js';

/** URL path -> file, relative to this module once built (dist/demo/). Nothing else is served. */
const ROUTES: Record<string, string> = {
  '/': '../demo-web/index.html',
  '/index.html': '../demo-web/index.html',
  '/style.css': '../demo-web/style.css',
  '/app.js': '../demo-web/app.js',
  '/app.js.map': '../demo-web/app.js.map',
  '/client.js': '../browser/client.js',
  '/client.js.map': '../browser/client.js.map',
  // The React variant of the page (demo/react).
  '/react': '../demo-web/react.html',
  '/react.js': '../demo-web/react.js',
  '/react.js.map': '../demo-web/react.js.map',
};

/**
 * The gateway's `httpHandler` for the demo page: a fixed set of files, read once at start
 * (a handful of small files). Returns false for anything else, which the gateway answers with 404.
 */
export function demoPageHandler(): {
  handler: (req: IncomingMessage, res: ServerResponse) => boolean;
  missing: string[];
} {
  const assets = new Map<string, StaticAsset>();
  const missing: string[] = [];
  for (const [path, file] of Object.entries(ROUTES)) {
    const location = fileURLToPath(new URL(file, import.meta.url));
    try {
      assets.set(path, { body: readFileSync(location), type: contentTypeOf(location) });
    } catch {
      missing.push(location);
    }
  }
  return { handler: serveAssets(assets), missing };
}
