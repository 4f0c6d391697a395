import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

interface ExportEntry {
  types?: string;
  default?: string;
}

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, ExportEntry>;
};

describe('package.json exports', () => {
  it('./client/browser has the client types, listed before default (nodenext resolves it)', () => {
    const entry = pkg.exports['./client/browser']!;
    expect(entry.types).toBe('./dist/src/client/index.d.ts');
    expect(entry.types).toBe(pkg.exports['./client']!.types);
    expect(Object.keys(entry)[0]).toBe('types');
    expect(entry.default).toBe('./dist/browser/client.js');
  });

  it('every entry has types, and only types and default: import and require load the same file', () => {
    for (const [name, entry] of Object.entries(pkg.exports)) {
      expect({ name, types: typeof entry.types }).toEqual({ name, types: 'string' });
      expect({ name, conditions: Object.keys(entry) }).toEqual({
        name,
        conditions: ['types', 'default'],
      });
    }
  });
});
