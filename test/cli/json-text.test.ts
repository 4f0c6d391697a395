/**
 * jsonText (src/cli/json-text.ts), through which the CLI prints a server's JSON on stdout: for any
 * JSON value, compact or indented, the text parses back to the value itself, holds no character a
 * terminal acts on (C0 but the layout's newlines, DEL, C1, bidirectional controls, U+2028/U+2029)
 * in keys or values, and is JSON.stringify's own text when there was none to escape.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonText } from '../../src/cli/json-text.js';
import { terminalText } from '../../src/cli/terminal-text.js';

/** Bidirectional controls (embeddings, overrides, isolates, LRM, RLM, ALM) and U+2028, U+2029. */
const LAYOUT = [
  0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067,
  0x2068, 0x2069,
];
const CONTROLS = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
/** What no output may hold raw: any of CONTROLS but the newline. */
const UNSAFE = /(?!\n)[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

const char = (code: number): string => String.fromCharCode(code);
/** Units of keys and strings: controls of every kind among printable text, lone surrogates. */
const unit = fc.oneof(
  fc.integer({ min: 0, max: 0x1f }).map(char),
  fc.integer({ min: 0x7f, max: 0x9f }).map(char),
  fc.constantFrom(...LAYOUT).map(char),
  fc.integer({ min: 0xd800, max: 0xdfff }).map(char),
  fc.constantFrom('a', ' ', '"', '\\', '/', 'é', '\u00a0', 'ש', 'م', '語', '😀'),
  fc.constant('binary' as const),
);
const hostileJson = fc.jsonValue({ stringUnit: unit, maxDepth: 4 });
/** JSON values whose strings and keys hold nothing of CONTROLS. */
const plainJson = fc
  .jsonValue({ maxDepth: 4 })
  .map((value) => JSON.parse(JSON.stringify(value).replace(CONTROLS, '')) as unknown);

describe('jsonText', () => {
  it('parses back to the value, and holds no raw control, compact or indented', () => {
    fc.assert(
      fc.property(hostileJson, (value) => {
        // JSON has no -0: the value a JSON text can mean is JSON.stringify's round trip.
        const meant = JSON.parse(JSON.stringify(value)) as unknown;
        const compact = jsonText(value);
        expect(JSON.parse(compact)).toEqual(meant);
        expect(compact).not.toMatch(UNSAFE);
        expect(compact).not.toContain('\n');

        const indented = jsonText(value, 2);
        expect(JSON.parse(indented)).toEqual(meant);
        expect(indented).not.toMatch(UNSAFE);
      }),
      { numRuns: 500 },
    );
  });

  it("is JSON.stringify's text when nothing needs escaping", () => {
    fc.assert(
      fc.property(plainJson, (value) => {
        expect(jsonText(value)).toBe(JSON.stringify(value));
        expect(jsonText(value, 2)).toBe(JSON.stringify(value, null, 2));
      }),
    );
  });

  it('escapes exactly the characters terminalText escapes, past C0 each as \\uXXXX', () => {
    const differ: number[] = [];
    for (let code = 0; code <= 0xffff; code++) {
      // JSON.stringify escapes these itself, and terminalText leaves them.
      if ((code >= 0xd800 && code <= 0xdfff) || code === 0x22 || code === 0x5c) continue;
      const text = char(code);
      const json = jsonText(text);
      const shown = code < 0x20 ? json.includes(text) : json === `"${text}"`;
      const wanted = terminalText(text) === text;
      const escape = `"\\u${code.toString(16).padStart(4, '0')}"`;
      if (shown !== wanted || (!wanted && code >= 0x20 && json !== escape)) differ.push(code);
    }
    expect(differ).toEqual([]);
  });

  it('writes keys and values alike, and a value without JSON text as null', () => {
    expect(jsonText({ 'a\u202eb': ['\u009b2J', '\u2067x\u2069'] })).toBe(
      '{"a\\u202eb":["\\u009b2J","\\u2067x\\u2069"]}',
    );
    expect(jsonText({ k: '\u007f\u0085' }, 2)).toBe('{\n  "k": "\\u007f\\u0085"\n}');
    expect(jsonText(undefined)).toBe('null');
  });
});
