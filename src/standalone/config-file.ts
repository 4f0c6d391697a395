// Reading a configuration file: YAML (.yaml, .yml) or JSON (.json), with `${ENV}` substitution in
// its string values. What it returns is checked by resolveStandaloneConfig; here only what makes
// the file unreadable is refused.
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { extname } from 'node:path';
import { isMap, isScalar, isSeq, Schema } from 'yaml';
import type { ScalarTag } from 'yaml';
import { describe } from '../peer/option-rules.js';
import { jsonNestingOffset, MAX_CONFIG_NESTING, valueNestsDeeper } from './config-nesting.js';
import { duplicateKeyOffsets, firstKeyNotAName, jsonDuplicateKey } from './duplicate-keys.js';
import { jsonErrorOffset } from './json-error-offset.js';
import { parseYamlBounded } from './parse-yaml-bounded.js';
import { describeSubstitutionProblems, substitute } from './env-substitution.js';
import type { SubstitutionProblems } from './env-substitution.js';

/**
 * Why a configuration file could not be loaded: `read` (no such file, no permission, not a
 * regular file (a folder, a FIFO, a device), an extension that is neither YAML nor JSON, over
 * 1 MiB), `parse` (a syntax error, a duplicate key, or a YAML key that is an alias, a list or a
 * map, with its line and column; nesting deeper than 64 levels), or `env` (variables the file
 * names that are not set; one line each).
 */
export class ConfigFileError extends Error {
  override readonly name = 'ConfigFileError';
  constructor(
    message: string,
    readonly kind: 'read' | 'parse' | 'env',
  ) {
    super(message);
  }
}

/** The most aliases a YAML file may expand (a bound against "billion laughs" files). */
const MAX_ALIAS_COUNT = 100;

/** The largest file read, in bytes: far above any real configuration (a few KB). */
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

const tooDeep = `nests deeper than ${MAX_CONFIG_NESTING} levels, the most a configuration file may nest`;

/**
 * Read `path`, parse it by its extension and substitute `${NAME}` / `${NAME:-default}` in its
 * string values from `env`. Rejects with a ConfigFileError naming the file (and the line and
 * column of a syntax error, or the path in the file of each variable that is not set).
 */
export async function loadConfigFile(
  path: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<unknown> {
  const kind = formatOf(path);
  const text = await readText(path);
  const problems: SubstitutionProblems = { missing: [], malformed: [] };
  const value =
    kind === 'json'
      ? parseJson(path, text, env, problems)
      : parseYamlText(path, text, env, problems);
  const messages = describeSubstitutionProblems(problems);
  if (messages.length > 0) {
    throw new ConfigFileError(messages.map((message) => `${path}: ${message}`).join('\n'), 'env');
  }
  return value;
}

function formatOf(path: string): 'json' | 'yaml' {
  const extension = extname(path).toLowerCase();
  if (extension === '.json') return 'json';
  if (extension === '.yaml' || extension === '.yml') return 'yaml';
  throw new ConfigFileError(
    `cannot read ${path}: a configuration file is YAML (.yaml, .yml) or JSON (.json), not ${extension || 'a file without an extension'}`,
    'read',
  );
}

/**
 * Opened without blocking: a FIFO put in place of the file after it was checked does not hold
 * the open until a writer comes (the handle's own stat refuses it then).
 */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/** What a file that is not a regular file is, for its refusal. */
function kindOf(stats: Stats): string {
  if (stats.isDirectory()) return 'a folder';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  return 'not a file';
}

function notRegular(path: string, stats: Stats): ConfigFileError {
  return new ConfigFileError(
    `cannot read ${path}: it is ${kindOf(stats)}, not a regular file`,
    'read',
  );
}

/**
 * The file's text, refused past MAX_CONFIG_FILE_BYTES before any of it is parsed. Only a regular
 * file is read: a FIFO (or a device) would hold the read until a writer comes, or without end;
 * it is refused before it is opened.
 */
async function readText(path: string): Promise<string> {
  // One byte more than the bound tells a file over it, however large (or endless) it is.
  const buffer = Buffer.alloc(MAX_CONFIG_FILE_BYTES + 1);
  let length = 0;
  try {
    const before = await stat(path);
    if (!before.isFile()) throw notRegular(path, before);
    const file = await open(path, READ_FLAGS);
    try {
      const opened = await file.stat();
      if (!opened.isFile()) throw notRegular(path, opened);
      for (;;) {
        const { bytesRead } = await file.read(buffer, length, buffer.length - length, null);
        length += bytesRead;
        if (bytesRead === 0 || length === buffer.length) break;
      }
    } finally {
      await file.close();
    }
  } catch (err) {
    if (err instanceof ConfigFileError) throw err;
    throw new ConfigFileError(`cannot read ${path}: ${(err as Error).message}`, 'read');
  }
  if (length > MAX_CONFIG_FILE_BYTES) {
    throw new ConfigFileError(
      `cannot read ${path}: larger than 1 MiB (${MAX_CONFIG_FILE_BYTES} bytes), the most a configuration file may be`,
      'read',
    );
  }
  return buffer.toString('utf8', 0, length);
}

function parseYamlText(
  path: string,
  text: string,
  env: Readonly<Record<string, string | undefined>>,
  problems: SubstitutionProblems,
): unknown {
  const parsed = parseYamlBounded(text, MAX_CONFIG_NESTING);
  if ('tooDeepAt' in parsed) {
    throw new ConfigFileError(`${path}${lineColumn(text, parsed.tooDeepAt)}: ${tooDeep}`, 'parse');
  }
  const { document } = parsed;
  const error = document.errors[0];
  if (error) {
    throw new ConfigFileError(
      `${path}${lineColumn(text, error.pos[0])}: ${error.message} (${error.code})`,
      'parse',
    );
  }
  const notAName = firstKeyNotAName(document);
  if (notAName !== undefined) {
    throw new ConfigFileError(
      `${path}${lineColumn(text, notAName.offset)}: a key is ${notAName.what}: a key of a configuration file is a name, never an alias, a list or a map`,
      'parse',
    );
  }
  // At the offset and in the words of the yaml package's own check, which is quadratic.
  const duplicate = duplicateKeyOffsets(document)[0];
  if (duplicate !== undefined) {
    throw new ConfigFileError(
      `${path}${lineColumn(text, duplicate)}: Map keys must be unique (DUPLICATE_KEY)`,
      'parse',
    );
  }
  substituteNode(document.contents, '', env, problems);
  let value: unknown;
  try {
    value = document.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) as unknown;
  } catch (err) {
    // Too many aliases expanded ("billion laughs"), or an alias to nothing.
    throw new ConfigFileError(`${path}: ${(err as Error).message}`, 'parse');
  }
  // An alias nests its anchor's value again: deeper than the text, or without end in its own anchor.
  if (valueNestsDeeper(value, MAX_CONFIG_NESTING)) {
    throw new ConfigFileError(
      `${path}: nests deeper than ${MAX_CONFIG_NESTING} levels through its aliases, the most a configuration file may nest`,
      'parse',
    );
  }
  return value;
}

/**
 * Substitute in every string scalar under `node`; an unquoted whole reference that yields a
 * YAML core schema null, boolean or number is that value (coreScalar).
 */
function substituteNode(
  node: unknown,
  path: string,
  env: Readonly<Record<string, string | undefined>>,
  problems: SubstitutionProblems,
): void {
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      substituteNode(pair.value, path ? `${path}.${key}` : key, env, problems);
    }
  } else if (isSeq(node)) {
    node.items.forEach((item: unknown, index) =>
      substituteNode(item, `${path}[${index}]`, env, problems),
    );
  } else if (isScalar(node) && typeof node.value === 'string') {
    const { text, whole } = substitute(node.value, env, path, problems);
    node.value = whole && node.type === 'PLAIN' ? coreScalar(text) : text;
  }
}

/** The YAML 1.2 core schema's null, boolean, integer and float forms, each with its resolver. */
const CORE_SCALAR_TAGS = new Schema({ schema: 'core' }).tags.filter(
  (tag): tag is ScalarTag => tag.default === true && tag.test !== undefined,
);

/**
 * `text` as the value its whole matches in the YAML core schema (`8080`, `0x1f`, `1e3`, `.inf`,
 * `true`, `null`, `~`, or nothing: null); any other text is kept exactly, a string. A variable's
 * value is never parsed as YAML: ` #` in it starts no comment, quotes stay, a leading `!` or `&`
 * is no tag or anchor, and its newlines stay newlines (a PEM key).
 */
function coreScalar(text: string): unknown {
  const tag = CORE_SCALAR_TAGS.find((candidate) => candidate.test!.test(text));
  if (!tag) return text;
  const value = tag.resolve(text, () => undefined, {});
  return isScalar(value) ? value.value : value;
}

function parseJson(
  path: string,
  text: string,
  env: Readonly<Record<string, string | undefined>>,
  problems: SubstitutionProblems,
): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const offset = jsonErrorOffset(text);
    const where = offset === undefined ? '' : lineColumn(text, offset);
    throw new ConfigFileError(`${path}${where}: ${(err as Error).message}`, 'parse');
  }
  // JSON.parse does not recurse; substituteValue and the checks do, once per level.
  const deep = jsonNestingOffset(text, MAX_CONFIG_NESTING);
  if (deep !== undefined) {
    throw new ConfigFileError(`${path}${lineColumn(text, deep)}: ${tooDeep}`, 'parse');
  }
  // JSON.parse keeps the last value of a repeated key: refused, as in YAML.
  const duplicate = jsonDuplicateKey(text);
  if (duplicate !== undefined) {
    throw new ConfigFileError(
      `${path}${lineColumn(text, duplicate.offset)}: Object keys must be unique, ${describe(duplicate.key)} repeats an earlier key (DUPLICATE_KEY)`,
      'parse',
    );
  }
  return substituteValue(value, '', env, problems);
}

/** `:line:column` (both from 1) of a character offset. */
function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `:${before.length}:${before[before.length - 1]!.length + 1}`;
}

/** JSON values: every string substituted (and kept a string). */
function substituteValue(
  value: unknown,
  path: string,
  env: Readonly<Record<string, string | undefined>>,
  problems: SubstitutionProblems,
): unknown {
  if (typeof value === 'string') return substitute(value, env, path, problems).text;
  if (Array.isArray(value)) {
    return value.map((item, index) => substituteValue(item, `${path}[${index}]`, env, problems));
  }
  if (typeof value === 'object' && value !== null) {
    // fromEntries defines own properties: a "__proto__" key stays a key (and is refused later).
    return Object.fromEntries(
      Object.entries(value).map(([key, child]) => [
        key,
        substituteValue(child, path ? `${path}.${key}` : key, env, problems),
      ]),
    );
  }
  return value;
}
