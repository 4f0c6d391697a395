// Duplicate keys of a parsed YAML document, found with one set per mapping. The yaml package's
// own check (`uniqueKeys`) compares each key with every earlier key of its mapping: a mapping of
// 40 000 keys take 20 s. This finds the same keys, and more, in one pass.
import { isScalar, Pair, visit, YAMLMap } from 'yaml';
import type { Document } from 'yaml';

/**
 * The offset of every key that repeats an earlier key of its mapping, in file order. Keys are
 * compared as the object the file becomes has them, not as YAML values (the yaml package's own
 * check compares values, and its toJS then keeps the last of the keys it took for two): a
 * scalar by its String (null: ""), so `1`, `01`, `0x1` and `"1"` are one key, and so are `null`,
 * `~` and `""`, or two `.nan`; an alias as its anchor's key; a list or a map as toJS writes it.
 */
export function duplicateKeyOffsets(document: Document.Parsed): number[] {
  const offsets: number[] = [];
  visit(document, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const { key } of map.items) {
        const name = objectKey(document, key);
        if (name === undefined) continue;
        const range = (key as { range?: readonly number[] }).range;
        if (seen.has(name) && range) offsets.push(range[0]!);
        else seen.add(name);
      }
    },
  });
  return offsets.sort((a, b) => a - b);
}

/** The key of the object toJS makes of a mapping with `key`; undefined if toJS refuses it. */
function objectKey(document: Document.Parsed, key: unknown): string | undefined {
  if (isScalar(key)) {
    const { value } = key;
    if (value === null) return '';
    if (typeof value !== 'object') return String(value as string | number | boolean | bigint);
  }
  // An alias, a list or a map (rare): as toJS makes it, of a mapping of this key alone.
  const alone = new YAMLMap(document.schema);
  alone.items.push(new Pair(key, null));
  try {
    return Object.keys(alone.toJS(document) as object)[0];
  } catch {
    // Too many aliases, or one to nothing: the document's own toJS refuses it.
    return undefined;
  }
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
