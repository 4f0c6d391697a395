// Duplicate keys in a YAML configuration file: found with one set per mapping (the yaml package's
// own check compares each key with every earlier one, so 40 000 keys take 20 s), reported as that
// check reports them: the first duplicate, with its line and column. Keys are compared as the
// object the file becomes has them (`1` and `"1"` are one key there), not as YAML values.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import * as yaml from 'yaml';
import { ConfigFileError, loadConfigFile } from '../../src/standalone/config-file.js';
import { duplicateKeyOffsets } from '../../src/standalone/duplicate-keys.js';

// The real composer, with the options each one is made with recorded.
const composerOptions = vi.hoisted(() => [] as unknown[]);
vi.mock('yaml', async (importOriginal) => {
  const real = await importOriginal<typeof yaml>();
  class Composer extends real.Composer {
    constructor(options?: ConstructorParameters<typeof real.Composer>[0]) {
      super(options);
      composerOptions.push(options);
    }
  }
  return { ...real, Composer };
});

const dir = mkdtempSync(join(tmpdir(), 'config-file-dup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function file(name: string, text: string): string {
  const path = join(dir, `${files++}-${name}`);
  writeFileSync(path, text);
  return path;
}

async function loaded(path: string): Promise<{ error?: ConfigFileError }> {
  try {
    await loadConfigFile(path, {});
    return {};
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigFileError);
    return { error: error as ConfigFileError };
  }
}

/** What the yaml package's own (quadratic) check finds: its DUPLICATE_KEY errors' offsets. */
function libraryDuplicates(text: string): number[] {
  const document = yaml.parseDocument(text, { uniqueKeys: true });
  return document.errors
    .filter((e) => e.code === 'DUPLICATE_KEY')
    .map((e) => e.pos[0])
    .sort((a, b) => a - b);
}

// Key spellings and the value YAML 1.2's core schema reads from each.
const spellings: readonly (readonly [string, unknown])[] = [
  ['a', 'a'],
  ['"a"', 'a'],
  ["'a'", 'a'],
  ['b', 'b'],
  ['1', 1],
  ['01', 1],
  ['0x1', 1],
  ['1.0', 1],
  ['"1"', '1'],
  ['0', 0],
  ['-0', -0],
  ['true', true],
  ['True', true],
  ['"true"', 'true'],
  ['null', null],
  ['~', null],
  ['"null"', 'null'],
  ['.nan', NaN],
];

const keyArb = fc.constantFrom(...spellings.map(([spelling]) => spelling));
const propsArb = fc.constantFrom('', '&x ', '!!str ', '&y !!str ');

/** A YAML mapping of the given keys, block or flow, nested mappings as some values. */
const mappingArb: fc.Arbitrary<string> = fc.letrec<{ map: string }>((tie) => ({
  map: fc.oneof(
    { maxDepth: 3, withCrossShrink: true },
    fc
      .array(fc.tuple(propsArb, keyArb, fc.oneof(fc.constant('v'), tie('map'))), { maxLength: 6 })
      .map((pairs) => `{ ${pairs.map(([p, k, v]) => `${p}${k}: ${v}`).join(', ')} }`),
    fc
      .array(fc.tuple(keyArb, fc.oneof(fc.constant('v'), tie('map'))), { maxLength: 6 })
      .map((pairs) => `{ ${pairs.map(([k, v]) => `${k}: ${v}`).join(', ')} }`),
  ),
})).map;

const blockArb = fc
  .array(fc.tuple(propsArb, keyArb, fc.oneof(fc.constant('v'), mappingArb)), {
    minLength: 1,
    maxLength: 12,
  })
  .map((pairs) => pairs.map(([p, k, v]) => `${p}${k}: ${v}\n`).join(''));

/**
 * The offsets of keys that make the same key of the object toJS makes of their mapping as an
 * earlier key (its value lost): the yaml package's own toJS is the oracle, each key counted by
 * how many keys the mapping's pairs up to it make.
 */
function collapsingKeys(document: yaml.Document.Parsed): number[] {
  const offsets: number[] = [];
  yaml.visit(document, {
    Map(_, map) {
      let count = 0;
      map.items.forEach((pair, i) => {
        const prefix = new yaml.YAMLMap(document.schema);
        prefix.items = map.items.slice(0, i + 1).map(({ key }) => new yaml.Pair(key, null));
        const keys = Object.keys(prefix.toJS(document) as object).length;
        if (keys === count) offsets.push((pair.key as yaml.Node).range![0]);
        count = keys;
      });
    },
  });
  return offsets.sort((a, b) => a - b);
}

describe('duplicate keys', () => {
  it('finds the keys that make one key of the object, at their offsets (property, toJS the oracle)', () => {
    fc.assert(
      fc.property(blockArb, (text) => {
        const document = yaml.parseDocument(text, { uniqueKeys: false });
        expect(document.errors).toEqual([]);
        const found = duplicateKeyOffsets(document);
        expect(found).toEqual(collapsingKeys(document));
        // Every key the yaml package's own check finds is among them.
        expect(found).toEqual(expect.arrayContaining(libraryDuplicates(text)));
      }),
      { numRuns: 300 },
    );
  });

  it('refuses the first repeated key of a flat mapping, at its line (model)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(spellings.length - 1), { maxLength: 10 }), async (keys) => {
        // The model: a key repeats an earlier one when both make the same key of an object
        // (null makes "", any other value its String).
        const names = keys.map((index) => {
          const value = spellings[index]![1];
          return value === null ? '' : String(value as string | number | boolean);
        });
        const first = names.findIndex((name, i) => names.slice(0, i).includes(name));
        const text = keys.map((index, line) => `${spellings[index]![0]}: ${line}\n`).join('');
        const path = file('flat.yaml', text);
        const { error } = await loaded(path);
        if (first === -1) expect(error).toBeUndefined();
        else {
          expect(error?.kind).toBe('parse');
          expect(error?.message).toBe(
            `${path}:${first + 1}:1: Map keys must be unique (DUPLICATE_KEY)`,
          );
        }
      }),
      { numRuns: 200 },
    );
  });

  it('1 and "1", null and "", .nan and .nan are one key of the object, refused at the second', async () => {
    for (const [first, second] of [
      ['1', '"1"'],
      ['true', '"true"'],
      ['null', '""'],
      ['.nan', '.nan'],
      ['.inf', 'Infinity'],
    ]) {
      const path = file('collapse.yaml', `topics:\n  ${first}: {}\n  ${second}: {}\n`);
      expect((await loaded(path)).error?.message).toBe(
        `${path}:3:3: Map keys must be unique (DUPLICATE_KEY)`,
      );
    }
  });

  it('an alias, a list or a map as a key is refused at its line and column, before duplicates', async () => {
    const notAName = (path: string, at: string, what: string): string =>
      `${path}:${at}: a key is ${what}: a key of a configuration file is a name, never an alias, a list or a map`;
    const alias = file('alias-key.yaml', 'a: &k port\nlisten:\n  port: 1\n  *k : 2\n');
    expect((await loaded(alias)).error?.message).toBe(notAName(alias, '4:3', 'an alias (*k)'));
    const list = file('list-key.yaml', 'topics:\n  ? [a, b]\n  : {}\n  "[ a, b ]": {}\n');
    expect((await loaded(list)).error?.message).toBe(notAName(list, '2:5', 'a list'));
    const map = file('map-key.yaml', 'topics:\n  x: 1\n  x: 2\n  ? { c: d }\n  : 2\n');
    expect((await loaded(map)).error?.message).toBe(notAName(map, '4:5', 'a map'));
  });

  it('the first duplicate in the file is the one named, nested or not', async () => {
    const path = file('nested.yaml', 'a:\n  x: 1\n  y: 2\n  x: 3\nb: 1\na: 2\n');
    expect((await loaded(path)).error?.message).toBe(
      `${path}:4:3: Map keys must be unique (DUPLICATE_KEY)`,
    );
  });

  it('a mapping of 40 000 keys is checked by the set per mapping, not the yaml package', async () => {
    const keys = Array.from({ length: 40_000 }, (_, i) => `  k${i}: 1\n`).join('');
    composerOptions.length = 0;
    expect((await loaded(file('many.yaml', `limits:\n${keys}`))).error).toBeUndefined();
    const withDuplicate = file('many-dup.yaml', `limits:\n${keys}  k17: 2\n`);
    expect((await loaded(withDuplicate)).error?.message).toBe(
      `${withDuplicate}:40002:3: Map keys must be unique (DUPLICATE_KEY)`,
    );
    expect(composerOptions).toEqual([
      expect.objectContaining({ uniqueKeys: false }),
      expect.objectContaining({ uniqueKeys: false }),
    ]);
  });
});

// JSON: JSON.parse keeps the last of a repeated key; the file is refused at the repeated key, as
// a YAML file is. Keys are compared as JSON.parse compares them: after their escapes.
const jsonKeys: readonly (readonly [string, string])[] = [
  ['"a"', 'a'],
  ['"\\u0061"', 'a'],
  ['"b"', 'b'],
  ['"1"', '1'],
  ['"__proto__"', '__proto__'],
  ['""', ''],
];

interface JsonText {
  readonly text: string;
  /** Offsets of keys repeating an earlier key of their object (the model). */
  readonly repeated: readonly number[];
}

type JsonTree = { kind: 'value'; text: string } | { kind: 'array'; items: JsonTree[] } | ObjectTree;
interface ObjectTree {
  kind: 'object';
  pairs: [number, JsonTree][];
}

const jsonTreeArb: fc.Arbitrary<JsonTree> = fc.letrec<{ tree: JsonTree }>((tie) => ({
  tree: fc.oneof(
    { maxDepth: 4, withCrossShrink: true },
    fc.constantFrom('1', '"a"', '"\\"a\\": 1,"', 'null', '{}', '[]').map((text) => ({
      kind: 'value' as const,
      text,
    })),
    fc.array(tie('tree'), { maxLength: 4 }).map((items) => ({ kind: 'array' as const, items })),
    fc
      .array(fc.tuple(fc.nat(jsonKeys.length - 1), tie('tree')), { maxLength: 5 })
      .map((pairs) => ({ kind: 'object' as const, pairs })),
  ),
})).tree;

/** The tree as JSON text, with the offset of each key that repeats one of its object's keys. */
function renderJson(tree: JsonTree): JsonText {
  let text = '';
  const repeated: number[] = [];
  const render = (node: JsonTree): void => {
    if (node.kind === 'value') text += node.text;
    else if (node.kind === 'array') {
      text += '[ ';
      node.items.forEach((item, i) => {
        if (i > 0) text += ', ';
        render(item);
      });
      text += ' ]';
    } else {
      const seen = new Set<string>();
      text += '{\n';
      node.pairs.forEach(([key, value], i) => {
        if (i > 0) text += ',\n';
        const [spelling, name] = jsonKeys[key]!;
        if (seen.has(name)) repeated.push(text.length);
        seen.add(name);
        text += `${spelling}: `;
        render(value);
      });
      text += '\n}';
    }
  };
  render(tree);
  return { text, repeated: repeated.sort((a, b) => a - b) };
}

function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `${before.length}:${before[before.length - 1]!.length + 1}`;
}

describe('duplicate keys in JSON', () => {
  it('a repeated key is refused at its line and column, exit 2 (parse), not its last value taken', async () => {
    const path = file('dup.json', '{"listen": {"port": 18201, "port": 18202}}');
    const { error } = await loaded(path);
    expect(error?.kind).toBe('parse');
    expect(error?.message).toBe(
      `${path}:1:28: Object keys must be unique, "port" repeats an earlier key (DUPLICATE_KEY)`,
    );
  });

  it('keys are compared after their escapes; the same key in other objects is not repeated', async () => {
    const escaped = file('escaped.json', '{\n  "path": "/a",\n  "p\\u0061th": "/b"\n}');
    expect((await loaded(escaped)).error?.message).toBe(
      `${escaped}:3:3: Object keys must be unique, "path" repeats an earlier key (DUPLICATE_KEY)`,
    );
    const apart = file(
      'apart.json',
      '{"limits": {"maxBatch": 1}, "upstreams": {"a": {"url": "http://x/rpc"}, "b": {"url": "http://x/rpc"}}, "path": "/\\"limits\\": 1"}',
    );
    expect((await loaded(apart)).error).toBeUndefined();
  });

  it('refuses the first repeated key in the file, nested or not (model)', async () => {
    await fc.assert(
      fc.asyncProperty(jsonTreeArb, async (tree) => {
        const { text, repeated } = renderJson({ kind: 'object', pairs: [[2, tree]] });
        const path = file('model.json', text);
        const { error } = await loaded(path);
        if (repeated.length === 0) expect(error).toBeUndefined();
        else {
          expect(error?.kind).toBe('parse');
          expect(error?.message).toMatch(
            new RegExp(`^${escapeRegExp(path)}:${lineColumn(text, repeated[0]!)}: Object keys`),
          );
        }
      }),
      { numRuns: 200 },
    );
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
