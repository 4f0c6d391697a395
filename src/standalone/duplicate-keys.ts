// The keys of a parsed YAML document: a key that is not a scalar (an alias, a list, a map), and
// duplicate keys, found with one set per mapping. The yaml package's own check (`uniqueKeys`)
// compares each key with every earlier key of its mapping: a mapping of 40 000 keys take 20 s.
// This finds the same keys, and more, in one pass.
import { isAlias, isMap, isScalar, isSeq, visit } from 'yaml';
import type { Document } from 'yaml';

/** A mapping key that is no name: its offset and what it is, for the refusal. */
export interface KeyNotAName {
  readonly offset: number;
  /** "an alias (*name)", "a list", "a map". */
  readonly what: string;
}

/**
 * The first mapping key in the file that is an alias, a list or a map. No key of a
 * configuration is one, and such a key would be turned into the object's key by expanding it
 * (an alias key its anchor's value, once per alias key, beyond the bound on aliases).
 */
export function firstKeyNotAName(document: Document.Parsed): KeyNotAName | undefined {
  let found: KeyNotAName | undefined;
  visit(document, {
    Pair(_, pair) {
      const { key } = pair;
      const what = isAlias(key)
        ? `an alias (*${key.source})`
        : isSeq(key)
          ? 'a list'
          : isMap(key)
            ? 'a map'
            : undefined;
      const offset = (key as { range?: readonly number[] } | null)?.range?.[0];
      if (what === undefined || offset === undefined) return undefined;
      if (found === undefined || offset < found.offset) found = { offset, what };
      return undefined;
    },
  });
  return found;
}

/**
 * The offset of every scalar key that repeats an earlier key of its mapping, in file order
 * (keys that are no scalar are refused first: firstKeyNotAName). Keys are compared as the object
 * the file becomes has them, not as YAML values (the yaml package's own check compares values,
 * and its toJS then keeps the last of the keys it took for two): a scalar by its String (null:
 * ""), so `1`, `01`, `0x1` and `"1"` are one key, and so are `null`, `~` and `""`, or two `.nan`.
 */
export function duplicateKeyOffsets(document: Document.Parsed): number[] {
  const offsets: number[] = [];
  visit(document, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const { key } of map.items) {
        const name = objectKey(key);
        if (name === undefined) continue;
        const range = (key as { range?: readonly number[] }).range;
        if (seen.has(name) && range) offsets.push(range[0]!);
        else seen.add(name);
      }
    },
  });
  return offsets.sort((a, b) => a - b);
}

/** The key of the object toJS makes of a mapping with scalar `key`; undefined for another key. */
function objectKey(key: unknown): string | undefined {
  if (key === null) return '';
  if (!isScalar(key)) return undefined;
  const { value } = key;
  if (value === null) return '';
  if (typeof value !== 'object') return String(value as string | number | boolean | bigint);
  return undefined;
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The first key of valid JSON `text` that repeats an earlier key of its object (JSON.parse keeps
 * the last of them): its offset and its name, or undefined when no key repeats. Keys are
 * compared as JSON.parse reads them, after their escapes (`"a"` and `"\u0061"` are one key).
 * One pass with one set per open object, no recursion.
 */
export function jsonDuplicateKey(text: string): { offset: number; key: string } | undefined {
  // One entry per open object or array: an object's keys so far, null for an array.
  const open: (Set<string> | null)[] = [];
  // Whether the next string is a key: just after an object's `{` or a `,` in an object.
  let keyNext = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) i++;
      }
      if (!keyNext) continue;
      keyNext = false;
      const key = JSON.parse(text.slice(start, i + 1)) as string;
      const keys = open[open.length - 1]!;
      if (keys.has(key)) return { offset: start, key };
      keys.add(key);
    } else if (c === OPEN_BRACE) {
      open.push(new Set());
      keyNext = true;
    } else if (c === OPEN_BRACKET) {
      open.push(null);
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      open.pop();
    } else if (c === COMMA) {
      keyNext = open[open.length - 1] != null;
    }
  }
  return undefined;
}
