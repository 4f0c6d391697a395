// How deep a configuration file nests. Reading a value (the ${ENV} substitution, the checks)
// recurses once per level, so a JSON file of 100 000 `[` would overflow the stack; these find the
// first level past the bound without recursing per level (YAML's text: parse-yaml-bounded.ts).
/** The deepest nesting of objects and arrays a configuration file may have (the wire's maxDepth). */
export const MAX_CONFIG_NESTING = 64;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The offset of the first `{` or `[` of valid JSON `text` that opens a level past `max` (the
 * outermost is level 1), or undefined when it nests no deeper.
 */
export function jsonNestingOffset(text: string, max: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return i;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return undefined;
}

/**
 * Whether `value` nests objects and arrays deeper than `max` (itself level 1). A YAML alias is
 * the object of its anchor again, so a value can nest deeper than its text, and an alias inside
 * its own anchor nests without end; each object's height is found once, and no path is followed
 * past `max` levels.
 */
export function valueNestsDeeper(value: unknown, max: number): boolean {
  const heights = new Map<object, number>();
  // How many levels `node` spans (1 for an object of scalars); Infinity once a path from `level`
  // goes past `max`, which ends the walk.
  const height = (node: object, level: number): number => {
    const known = heights.get(node);
    if (known !== undefined) return known;
    if (level > max) return Infinity;
    let below = 0;
    for (const child of Object.values(node as Record<string, unknown>)) {
      if (typeof child !== 'object' || child === null) continue;
      below = Math.max(below, height(child, level + 1));
      if (level + below > max) return Infinity;
    }
    heights.set(node, below + 1);
    return below + 1;
  };
  return typeof value === 'object' && value !== null && height(value, 1) > max;
}
