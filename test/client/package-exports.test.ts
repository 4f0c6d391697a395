import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

interface ExportEntry {
  types?: string;
  default?: string;
}

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, ExportEntry | string>;
};

/** The module entries; the others name a file served as it is. */
const modules = Object.entries(pkg.exports).filter(
  (entry): entry is [string, ExportEntry] => typeof entry[1] === 'object',
);

describe('package.json exports', () => {
  it('./client/browser has the client types, listed before default (nodenext resolves it)', () => {
    const entry = pkg.exports['./client/browser'] as ExportEntry;
    expect(entry.types).toBe('./dist/src/client/index.d.ts');
    expect(entry.types).toBe((pkg.exports['./client'] as ExportEntry).types);
    expect(Object.keys(entry)[0]).toBe('types');
    expect(entry.default).toBe('./dist/browser/client.js');
  });

  it('every entry has types, and only types and default (the root a browser condition before them): import and require load the same file', () => {
    for (const [name, entry] of modules) {
      expect({ name, types: typeof entry.types }).toEqual({ name, types: 'string' });
      // The root has a browser condition first: the client's entry, for browser bundlers.
      const conditions = name === '.' ? ['browser', 'types', 'default'] : ['types', 'default'];
      expect({ name, conditions: Object.keys(entry) }).toEqual({ name, conditions });
    }
  });

  it('the root under the browser condition is "./client", its types and module', () => {
    expect((pkg.exports['.'] as Record<string, unknown>)['browser']).toEqual(
      pkg.exports['./client'],
    );
  });

  it('exports the shared worker’s script and package.json as files, which the build makes and ships', () => {
    expect(pkg.exports['./shared-worker.js']).toBe('./dist/browser/shared-worker.js');
    expect(pkg.exports['./package.json']).toBe('./package.json');
    for (const file of ['./dist/browser/shared-worker.js', './package.json']) {
      expect(existsSync(new URL(`../../${file}`, import.meta.url)), file).toBe(true);
    }
  });
});
