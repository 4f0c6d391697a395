// The `static` section: the files of one folder served on the gateway's port (a browser page
// next to its endpoint), and the browser client bundle at /wsrpc-client.js so the page needs no
// build step. Files are read once at start: no path from a request ever reaches the file system.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cut } from '../peer/option-rules.js';
import { contentTypeOf, serveAssets } from '../server/static-assets.js';
import type { StaticAsset } from '../server/static-assets.js';

/** The most files a static folder may hold (subfolders included). */
export const MAX_STATIC_FILES = 1_000;
/** The most bytes a static folder's files may hold together (64 MiB). */
export const MAX_STATIC_BYTES = 64 * 1024 * 1024;
/** Where the browser client bundle is served. */
export const CLIENT_BUNDLE_PATH = '/wsrpc-client.js';

/** The package's browser bundle, relative to this module once built (dist/src/standalone/). */
const CLIENT_BUNDLE = new URL('../../browser/client.js', import.meta.url);

/**
 * An `httpHandler` serving the files under `dir` (`/` is `index.html`) and the browser client at
 * /wsrpc-client.js; false for anything else (404). Throws when the folder cannot be read or
 * holds more than MAX_STATIC_FILES files or MAX_STATIC_BYTES bytes.
 */
export function staticFilesHandler(
  dir: string,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const assets = new Map<string, StaticAsset>();
  let bytes = 0;
  const add = (urlPath: string, file: string): void => {
    const body = readFileSync(file);
    bytes += body.length;
    if (assets.size >= MAX_STATIC_FILES || bytes > MAX_STATIC_BYTES) {
      throw new RangeError(
        `static.dir holds more than ${MAX_STATIC_FILES} files or ${MAX_STATIC_BYTES} bytes: ${cut(dir)}`,
      );
    }
    assets.set(urlPath, { body, type: contentTypeOf(file) });
  };
  for (const file of filesUnder(dir)) {
    const urlPath = `/${relative(dir, file).split(sep).map(encodeURIComponent).join('/')}`;
    add(urlPath, file);
    if (urlPath.endsWith('/index.html')) add(urlPath.slice(0, -'index.html'.length), file);
  }
  try {
    if (!assets.has(CLIENT_BUNDLE_PATH)) add(CLIENT_BUNDLE_PATH, fileURLToPath(CLIENT_BUNDLE));
  } catch {
    // Running from the sources (no dist/browser): the page brings its own client, or none.
  }
  return serveAssets(assets);
}

/** Every regular file under `dir`, subfolders included (hidden entries skipped). */
function filesUnder(dir: string): string[] {
  const files: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.')) continue;
    const path = join(dir, name);
    const stat = statSync(path);
    if (stat.isDirectory()) files.push(...filesUnder(path));
    else if (stat.isFile()) files.push(path);
    if (files.length > MAX_STATIC_FILES) break;
  }
  return files;
}
