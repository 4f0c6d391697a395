// An unquoted `${NAME}` in a YAML configuration file: the variable's value exactly, a string,
// unless the whole of it is a YAML core schema null, boolean, integer or float. It is never
// parsed as YAML (a ` #` in a secret is no comment, a PEM's newlines stay). A default holding a
// reference of its own is refused, naming it. Real files, read by loadConfigFile.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigFileError, loadConfigFile } from '../../src/standalone/config-file.js';

const dir = mkdtempSync(join(tmpdir(), 'config-env-substitution-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
async function load(text: string, env: Record<string, string>): Promise<unknown> {
  const path = join(dir, `${files++}.yaml`);
  writeFileSync(path, text);
  return loadConfigFile(path, env);
}

const PEM =
  '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\nabc\n-----END PUBLIC KEY-----\n';

describe('an unquoted whole reference', () => {
  it.each([
    ['a secret holding " #"', 'abcdefghijklmnopqrstuvwxyz0123456789 #tail-of-secret'],
    ['a secret in quotes', "'abcdefghijklmnopqrstuvwxyz0123456789'"],
    ['a secret starting with "!"', '!abc defghijklmnopqrstuvwxyz0123456789'],
    ['a secret starting with "&"', '&abc defghijklmnopqrstuvwxyz0123456789'],
    ['a secret starting with "*"', '*abc'],
    ['a PEM key, its newlines', PEM],
    ['a flow list', '[1.2.3.4, "5.6.7.8"]'],
    ['a flow map', '{ a: 1 }'],
    ['a block list', '- a'],
    ['a directive', '%YAML 1.2'],
    ['a YAML 1.1 boolean', 'yes'],
    ['a number with a space', '80 80'],
    ['a number and a comment', '8080 # port'],
  ])('%s: the value exactly, a string', async (_name, value) => {
    expect(await load('jwt:\n  secret: ${S}\n', { S: value })).toEqual({
      jwt: { secret: value },
    });
  });

  it.each([
    ['8080', 8080],
    ['-1', -1],
    ['0x10', 16],
    ['0o17', 15],
    ['1.5', 1.5],
    ['1e3', 1000],
    ['.inf', Infinity],
    ['-.inf', -Infinity],
    ['true', true],
    ['False', false],
    ['null', null],
    ['~', null],
    ['', null],
  ])('%s: the YAML core schema value %s', async (value, expected) => {
    expect(await load('shutdown:\n  drainDeadlineMs: ${V}\n', { V: value })).toEqual({
      shutdown: { drainDeadlineMs: expected },
    });
  });

  it('.nan is NaN, and a default is read the same way', async () => {
    const loaded = (await load('a: ${V}\nb: ${W:-8080}\nc: ${W:-!x y}\n', { V: '.nan' })) as Record<
      string,
      unknown
    >;
    expect(loaded['a']).toBeNaN();
    expect(loaded['b']).toBe(8080);
    expect(loaded['c']).toBe('!x y');
  });

  it('a quoted reference, and one with text around it, stay strings', async () => {
    expect(await load('a: "${V}"\nb: x${V}\n', { V: '8080' })).toEqual({ a: '8080', b: 'x8080' });
  });
});

describe('a default holding a reference', () => {
  it.each([
    ['${A:-${B}}', '"${A:-${B}}"'],
    ['/x${A:-a${B}c}/y', '"${A:-a${B}c}"'],
    ['${A:-$${B}}', '"${A:-$${B}}"'],
    ['${A:-${B}', '"${A:-${B}"'],
  ])('%s is refused, naming it and its path', async (reference, shown) => {
    const err = await load(`path: '${reference}'\n`, { B: '/b' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigFileError);
    expect((err as ConfigFileError).kind).toBe('env');
    expect((err as ConfigFileError).message).toBe(
      `${join(dir, `${files - 1}.yaml`)}: path: ${shown} holds a reference in its default, which is taken as written: give the default as plain text`,
    );
  });

  it('a default with braces or colons of its own is still taken', async () => {
    expect(await load("path: '${A:-/a:b}'\nother: '${A:-a}b}'\n", {})).toEqual({
      path: '/a:b',
      other: 'ab}',
    });
  });
});
