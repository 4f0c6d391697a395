/**
 * JSON text that is the same for equal values whatever their objects' key
 * order: keys are sorted at every level (arrays keep their order). Throws a
 * TypeError, as JSON.stringify does, for cycles and BigInt.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sorted(value, new Set()));
}

function sorted(value: unknown, ancestors: Set<object>): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return sorted(toJSON.call(value) as unknown, ancestors);
  if (ancestors.has(value)) throw new TypeError('Converting circular structure to JSON');
  ancestors.add(value);
  let out: unknown;
  if (Array.isArray(value)) {
    out = value.map((item: unknown) => sorted(item, ancestors));
  } else {
    const record = value as Record<string, unknown>;
    // fromEntries defines its keys: an own "__proto__" key stays a key, not the prototype.
    out = Object.fromEntries(
      Object.keys(record)
        .sort()
        .map((key) => [key, sorted(record[key], ancestors)]),
    );
  }
  ancestors.delete(value);
  return out;
}
