// The `static` section: the files of one folder served on the gateway's port (a browser page
// next to its endpoint), and the browser client bundle at /wsrpc-client.js so the page needs no
// build step. Files are read once at start: no path from a request ever reaches the file system.
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from 'node:fs';
import { readdirSync, realpathSync, statSync } from 'node:fs';
import type { Stats } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cut } from '../peer/option-rules.js';
import { contentTypeOf, serveAssets } from '../server/static-assets.js';
import type { StaticAsset } from '../server/static-assets.js';
import type { StandaloneConfig } from './standalone-config.js';

/** The most files a static folder may serve. */
export const MAX_STATIC_FILES = 1_000;
/**
 * The most folder paths under it a static folder may serve (subfolders, and every path links to
 * them make): folders linked to one another are refused here rather than walked without end.
 */
export const MAX_STATIC_FOLDERS = 1_000;
/** The most bytes a static folder's files may hold together (64 MiB). */
export const MAX_STATIC_BYTES = 64 * 1024 * 1024;
/** Where the browser client bundle is served. */
export const CLIENT_BUNDLE_PATH = '/wsrpc-client.js';

/** The package's browser bundle, relative to this module once built (dist/src/standalone/). */
const CLIENT_BUNDLE = new URL('../../browser/client.js', import.meta.url);

/** Opened without blocking: a FIFO put in place of a listed file cannot hold the start. */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/** One file to serve, listed and sized before any is read. */
interface ListedFile {
  /** Its URL path, each segment as encodeURIComponent writes it. */
  readonly urlPath: string;
  /** Its real path (a symlink's target). */
  readonly file: string;
  readonly size: number;
}

/**
 * An `httpHandler` serving the files under `dir` (`/` is `index.html`) and the browser client at
 * /wsrpc-client.js; false for anything else (404). Throws (naming `name`, the folder as the
 * configuration gives it) when the folder cannot be read, is not a folder, or holds more than
 * MAX_STATIC_FILES files or MAX_STATIC_BYTES bytes: sizes are checked before any file is read.
 */
export function staticFilesHandler(
  dir: string,
  name = dir,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const listed = listStaticFiles(dir, name);
  const assets = new Map<string, StaticAsset>();
  // A file listed twice (through a symlink) is read once.
  const bodies = new Map<string, Buffer>();
  let bytes = 0;
  for (const { urlPath, file } of listed) {
    let body = bodies.get(file);
    if (!body) {
      body = readAtMost(file, MAX_STATIC_BYTES - bytes, name);
      bytes += body.length;
      bodies.set(file, body);
    }
    const asset = { body, type: contentTypeOf(file) };
    assets.set(urlPath, asset);
    if (urlPath.endsWith('/index.html')) assets.set(urlPath.slice(0, -'index.html'.length), asset);
  }
  if (!assets.has(CLIENT_BUNDLE_PATH)) {
    const bundle = fileURLToPath(CLIENT_BUNDLE);
    try {
      assets.set(CLIENT_BUNDLE_PATH, {
        body: readAtMost(bundle, MAX_STATIC_BYTES, name),
        type: contentTypeOf(bundle),
      });
    } catch {
      // Running from the sources (no dist/browser): the page brings its own client, or none.
    }
  }
  return serveAssets(assets);
}

/**
 * What `serve` would refuse in `static.dir` (read relative to `baseDir`), as serve words it:
 * undefined when the folder is usable, or there is none. For check-config.
 */
export function staticDirProblem(
  config: Pick<StandaloneConfig, 'static'>,
  baseDir: string,
): string | undefined {
  if (!config.static) return undefined;
  try {
    staticFilesHandler(resolve(baseDir, config.static.dir), config.static.dir);
    return undefined;
  } catch (err) {
    return withCauses(err as Error);
  }
}

/**
 * A file or folder of static.dir that cannot be read: the system's reason is the cause, which
 * pino logs after the message (`static.dir: cannot read web: ENOENT: ...`).
 */
function cannotRead(what: string, err: unknown): Error {
  return new Error(`static.dir: cannot read ${cut(what)}`, { cause: err });
}

/** The error's message followed by its causes', as pino's error serializer writes it. */
function withCauses(err: Error): string {
  const cause = err.cause;
  return cause instanceof Error ? `${err.message}: ${withCauses(cause)}` : err.message;
}

/**
 * The files under `dir` to serve, subfolders included, with their sizes; nothing is read. Hidden
 * entries are skipped, and so is a symlink whose target is not inside the folder (its real
 * path), does not exist, or is a folder it is already in. A folder symlinks lead to is served at
 * each of their paths, but read once; every folder path under the root counts against
 * MAX_STATIC_FOLDERS, so folders linked to each other cannot make the listing grow without bound.
 */
function listStaticFiles(dir: string, name: string): ListedFile[] {
  let root: string;
  try {
    root = realpathSync(dir);
    if (!statSync(root).isDirectory()) {
      throw new TypeError(`static.dir: ${cut(name)} is not a folder`);
    }
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw cannotRead(name, err);
  }
  const inside = (path: string): boolean =>
    path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
  // Each real folder's entries, read once however many paths lead to it.
  const listings = new Map<string, readonly ListedEntry[]>();
  const listing = (folder: string): readonly ListedEntry[] => {
    let entries = listings.get(folder);
    if (!entries) {
      entries = readFolder(folder, inside, () => join(name, relative(root, folder)));
      listings.set(folder, entries);
    }
    return entries;
  };
  const files: ListedFile[] = [];
  let folders = 0;
  let bytes = 0;
  const tooMany = (what: string, most: number): RangeError =>
    new RangeError(
      `static.dir: ${cut(name)} holds more than ${most} ${what}, the most it may hold`,
    );
  const walk = (folder: string, urlPath: string, within: ReadonlySet<string>): void => {
    // The root is not one of the folders under it.
    if (urlPath !== '' && ++folders > MAX_STATIC_FOLDERS) {
      throw tooMany('folder paths (symlinks to folders included)', MAX_STATIC_FOLDERS);
    }
    for (const { entry, path, stat } of listing(folder)) {
      const url = `${urlPath}/${encodeURIComponent(entry)}`;
      if (stat.isDirectory()) {
        if (!within.has(path)) walk(path, url, new Set([...within, path]));
      } else if (stat.isFile()) {
        files.push({ urlPath: url, file: path, size: stat.size });
        bytes += stat.size;
        if (files.length > MAX_STATIC_FILES) throw tooMany('files', MAX_STATIC_FILES);
        if (bytes > MAX_STATIC_BYTES) throw overBudget(name);
      }
    }
  };
  walk(root, '', new Set([root]));
  return files;
}

/** An entry of a folder to serve: its name, its real path, and what it is. */
interface ListedEntry {
  readonly entry: string;
  readonly path: string;
  readonly stat: Stats;
}

/** The entries of `folder` to serve: not hidden, and (a symlink) leading inside the folder. */
function readFolder(
  folder: string,
  inside: (path: string) => boolean,
  shownAs: () => string,
): ListedEntry[] {
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch (err) {
    throw cannotRead(shownAs(), err);
  }
  const entries: ListedEntry[] = [];
  for (const entry of names) {
    if (entry.startsWith('.')) continue;
    const target = resolvedEntry(join(folder, entry), inside);
    if (target) entries.push({ entry, ...target });
  }
  return entries;
}

/**
 * An entry's real path and what it is; undefined for a symlink that leads outside the folder
 * (`inside` says), or nowhere.
 */
function resolvedEntry(
  path: string,
  inside: (path: string) => boolean,
): { path: string; stat: Stats } | undefined {
  const stat = lstatSync(path);
  if (!stat.isSymbolicLink()) return { path, stat };
  try {
    const real = realpathSync(path);
    return inside(real) ? { path: real, stat: statSync(real) } : undefined;
  } catch {
    return undefined;
  }
}

function overBudget(name: string): RangeError {
  return new RangeError(
    `static.dir: ${cut(name)} holds more than ${MAX_STATIC_BYTES} bytes (64 MiB), the most its files may hold together`,
  );
}

/**
 * A regular file's bytes, refused (over budget) past `budget`: a file that grew, or was replaced
 * by another, after it was listed is read no further than that.
 */
function readAtMost(file: string, budget: number, name: string): Buffer {
  let fd: number;
  try {
    fd = openSync(file, READ_FLAGS);
  } catch (err) {
    throw cannotRead(file, err);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new TypeError(`static.dir: ${cut(file)} is not a regular file`);
    if (stat.size > budget) throw overBudget(name);
    const body = Buffer.alloc(stat.size);
    let length = 0;
    while (length < body.length) {
      const read = readSync(fd, body, length, body.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return body.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}
