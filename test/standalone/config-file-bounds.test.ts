// What a configuration file may not be, whatever its keys: larger than 1 MiB, nested deeper than
// 64 levels (JSON, YAML flow and block collections, YAML aliases); each refused with exit 2 by
// `check-config` (run in-process here) and `serve`, with the line and column where there is one.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { runGatewayCommand } from '../../src/cli/gateway-commands.js';
import { ConfigFileError, loadConfigFile } from '../../src/standalone/config-file.js';
import { jsonNestingOffset, valueNestsDeeper } from '../../src/standalone/config-nesting.js';
import { parseYamlBounded } from '../../src/standalone/parse-yaml-bounded.js';
import { stringify as yamlText } from 'yaml';

const dir = mkdtempSync(join(tmpdir(), 'config-file-bounds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function file(name: string, text: string): string {
  const path = join(dir, `${files++}-${name}`);
  writeFileSync(path, text);
  return path;
}

async function loadError(path: string): Promise<ConfigFileError> {
  const err = await loadConfigFile(path, {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigFileError);
  return err as ConfigFileError;
}

/** `wsrpc-gateway check-config FILE` in-process: its exit code and stderr. */
async function checkConfig(path: string): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const io = {
    stdout: { write: () => true },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
  };
  const code = await runGatewayCommand(['check-config', path], io);
  return { code, stderr };
}

describe('nesting past 64 levels', () => {
  it('JSON: refused at the 65th opening bracket, exit 2', async () => {
    const deep = file('deep.json', `{"path": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
    const err = await loadError(deep);
    expect(err.kind).toBe('parse');
    expect(err.message).toBe(
      `${deep}:1:73: nests deeper than 64 levels, the most a configuration file may nest`,
    );
    const { code, stderr } = await checkConfig(deep);
    expect(code).toBe(2);
    expect(stderr).toBe(`${err.message}\n`);
  });

  it('JSON: 64 levels load; brackets in strings do not count', async () => {
    const text = `${'{"a":'.repeat(64)}"${'['.repeat(100)}"${'}'.repeat(64)}`;
    let value = await loadConfigFile(file('deep64.json', text), {});
    for (let i = 0; i < 64; i++) value = (value as { a: unknown }).a;
    expect(value).toBe('['.repeat(100));
  });

  it('YAML flow collections: refused at the 65th, exit 2', async () => {
    const deep = file('flow.yaml', `path: /rpc\nlimits: ${'['.repeat(100_000)}\n`);
    const err = await loadError(deep);
    expect(err.kind).toBe('parse');
    // limits' first `[` is level 2 (the top mapping is level 1): the 64th is level 65.
    expect(err.message).toBe(
      `${deep}:2:72: nests deeper than 64 levels, the most a configuration file may nest`,
    );
    const { code, stderr } = await checkConfig(deep);
    expect(code).toBe(2);
    expect(stderr).toBe(`${err.message}\n`);
  });

  it('YAML block mappings and sequences: refused at the 65th level, exit 2', async () => {
    const lines = Array.from({ length: 200 }, (_, i) => `${'  '.repeat(i)}a${i}:`);
    const mappings = file('block.yaml', `${lines.join('\n')} x\n`);
    const err = await loadError(mappings);
    expect(err.kind).toBe('parse');
    expect(err.message).toBe(
      `${mappings}:65:129: nests deeper than 64 levels, the most a configuration file may nest`,
    );
    expect((await checkConfig(mappings)).code).toBe(2);

    const sequences = file('seq.yaml', `x:\n  ${'- '.repeat(5000)}1\n`);
    const seqErr = await loadError(sequences);
    expect(seqErr.message).toBe(
      `${sequences}:2:129: nests deeper than 64 levels, the most a configuration file may nest`,
    );
    expect((await checkConfig(sequences)).code).toBe(2);
  });

  it('YAML: 64 levels load', async () => {
    const lines = Array.from({ length: 64 }, (_, i) => `${'  '.repeat(i)}a${i}:`);
    let value = await loadConfigFile(file('block64.yaml', `${lines.join('\n')} x\n`), {});
    for (let i = 0; i < 63; i++) value = (value as Record<string, unknown>)[`a${i}`];
    expect(value).toEqual({ a63: 'x' });
    const flow = await loadConfigFile(file('flow64.yaml', `${'['.repeat(64)}${']'.repeat(64)}`));
    expect(flow).toBeInstanceOf(Array);
  });

  it('YAML aliases: an alias inside its own anchor nests without end, refused, exit 2', async () => {
    for (const text of ['listen: &a [*a]\n', 'jwt: &a { secret: *a }\n']) {
      const path = file('cycle.yaml', text);
      const err = await loadError(path);
      expect(err.kind).toBe('parse');
      expect(err.message).toBe(
        `${path}: nests deeper than 64 levels through its aliases, the most a configuration file may nest`,
      );
      expect(await checkConfig(path)).toEqual({ code: 2, stderr: `${err.message}\n` });
    }
  });

  it('YAML aliases that nest within 64 levels load', async () => {
    const value = await loadConfigFile(
      file('alias.yaml', 'a: &a { b: [1] }\nc: { d: *a }\ne: [*a, *a]\n'),
      {},
    );
    expect(value).toEqual({ a: { b: [1] }, c: { d: { b: [1] } }, e: [{ b: [1] }, { b: [1] }] });
  });
});

it('a second YAML document is refused at its line', async () => {
  const path = file('two.yaml', 'path: /a\n---\npath: /b\n');
  const err = await loadError(path);
  expect(err.kind).toBe('parse');
  expect(err.message).toBe(
    `${path}:2:1: a configuration file is one YAML document, and another starts here (MULTIPLE_DOCS)`,
  );
});

describe('nesting depth (model: a recursive walk)', () => {
  const treeArb = fc.letrec<{ tree: unknown }>((tie) => ({
    tree: fc.oneof(
      { maxDepth: 8 },
      fc.oneof(fc.integer(), fc.string(), fc.constantFrom('[', '{"', '\\"[', null)),
      fc.array(tie('tree'), { maxLength: 4 }),
      fc.dictionary(fc.string({ maxLength: 3 }), tie('tree'), { maxKeys: 4 }),
    ),
  })).tree;
  const depth = (value: unknown): number =>
    typeof value === 'object' && value !== null
      ? 1 + Math.max(0, ...Object.values(value).map(depth))
      : 0;

  it('JSON text and values agree with the model, shared parts and all', () => {
    fc.assert(
      fc.property(treeArb, fc.nat(10), (tree, max) => {
        const deeper = depth(tree) > max;
        expect(jsonNestingOffset(JSON.stringify(tree), max) !== undefined).toBe(deeper);
        expect(valueNestsDeeper(tree, max)).toBe(deeper);
        // The same object twice, as a YAML alias gives it: one level more, the same answer.
        expect(valueNestsDeeper([tree, { again: tree }], max)).toBe(depth(tree) + 2 > max);
      }),
      { numRuns: 500 },
    );
  });

  it('YAML text, block and flow, agrees with the model', () => {
    fc.assert(
      fc.property(treeArb, fc.nat(10), (tree, max) => {
        const deeper = depth(tree) > max;
        for (const text of [yamlText(tree), JSON.stringify(tree)]) {
          const parsed = parseYamlBounded(text, max);
          expect('tooDeepAt' in parsed).toBe(deeper);
          if ('document' in parsed) {
            expect(parsed.document.errors).toEqual([]);
            expect(parsed.document.toJS()).toEqual(tree);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('a file over 1 MiB', () => {
  const MiB = 1024 * 1024;

  it('is refused before parsing, naming the bound, exit 2', async () => {
    // Invalid past its first line: refused for its size, not its syntax.
    const path = file('big.yaml', `path: /rpc\n${'['.repeat(MiB)}`);
    const err = await loadError(path);
    expect(err.kind).toBe('read');
    expect(err.message).toBe(
      `cannot read ${path}: larger than 1 MiB (1048576 bytes), the most a configuration file may be`,
    );
    expect(await checkConfig(path)).toEqual({ code: 2, stderr: `${err.message}\n` });
    const json = file('big.json', `{"path": "/rpc", "x": "${'x'.repeat(MiB)}"}`);
    expect((await loadError(json)).kind).toBe('read');
  });

  it('1 MiB exactly loads (bytes, not characters)', async () => {
    // 'é' is two bytes in UTF-8: the file has fewer characters than bytes.
    const comment = `path: /rpc\n# ${'é'.repeat(MiB / 2 - 10)}`;
    const padded = comment + ' '.repeat(MiB - Buffer.byteLength(comment));
    expect(Buffer.byteLength(padded)).toBe(MiB);
    expect(await loadConfigFile(file('exact.yaml', padded), {})).toEqual({ path: '/rpc' });
    const over = file('over.yaml', `${padded}é`);
    expect((await loadError(over)).kind).toBe('read');
  });
});
