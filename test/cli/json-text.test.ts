/**
 * jsonText (src/cli/json-text.ts), through which the CLI prints a server's JSON on stdout: for any
 * JSON value, compact or indented, the text parses back to the value itself, holds no character a
 * terminal acts on or shows as nothing (C0 but the layout's newlines, DEL, C1, format characters,
 * default-ignorables, U+2028/U+2029) raw in keys or values but inside legitimate emoji and joined
 * script, escapes exactly where terminalText escapes, and is JSON.stringify's own text when there
 * was none to escape.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonText, jsonTextLength } from '../../src/cli/json-text.js';
import { terminalText } from '../../src/cli/terminal-text.js';
import { HIDDEN, LEGITIMATE_SAMPLES, holdsNoHiddenRaw, hostileUnit, tags } from './hidden-text.js';

const char = (code: number): string => String.fromCodePoint(code);
/** `\uXXXX` for each UTF-16 unit of `text`: a surrogate pair for an astral character. */
const jsonEscape = (text: string): string =>
  Array.from(
    { length: text.length },
    (_, at) => `\\u${text.charCodeAt(at).toString(16).padStart(4, '0')}`,
  ).join('');
const hostileJson = fc.jsonValue({
  stringUnit: fc.oneof(hostileUnit, fc.integer({ min: 0, max: 0x10ffff }).map(char)),
  maxDepth: 4,
});
/** JSON values whose strings and keys hold nothing hidden. */
const plainJson = fc
  .jsonValue({ maxDepth: 4 })
  .map(
    (value) =>
      JSON.parse(JSON.stringify(value).replace(new RegExp(HIDDEN.source, 'gv'), '')) as unknown,
  );
/** Text JSON.stringify writes as it is: no C0, quote, backslash or lone surrogate. */
const stringifiedAsIs = fc
  .string({ unit: hostileUnit, maxLength: 40 })
  .map((s) =>
    [...s].filter((c) => c >= ' ' && c !== '"' && c !== '\\' && !/\p{Cs}/u.test(c)).join(''),
  );

describe('jsonText', () => {
  it('parses back to the value, and holds no raw control, compact or indented', () => {
    fc.assert(
      fc.property(hostileJson, (value) => {
        // JSON has no -0: the value a JSON text can mean is JSON.stringify's round trip.
        const meant = JSON.parse(JSON.stringify(value)) as unknown;
        const compact = jsonText(value);
        expect(JSON.parse(compact)).toEqual(meant);
        expect(holdsNoHiddenRaw(compact)).toBe(true);
        expect(compact).not.toContain('\n');

        const indented = jsonText(value, 2);
        expect(JSON.parse(indented)).toEqual(meant);
        expect(holdsNoHiddenRaw(indented)).toBe(true);
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
    for (let code = 0; code <= 0x10ffff; code++) {
      // JSON.stringify escapes these itself, and terminalText leaves them.
      if ((code >= 0xd800 && code <= 0xdfff) || code === 0x22 || code === 0x5c) continue;
      const text = char(code);
      const json = jsonText(text);
      const shown = code < 0x20 ? json.includes(text) : json === `"${text}"`;
      const wanted = terminalText(text) === text;
      if (shown !== wanted || (!wanted && code >= 0x20 && json !== `"${jsonEscape(text)}"`)) {
        differ.push(code);
      }
    }
    expect(differ).toEqual([]);
  });

  it('escapes where terminalText escapes in context too (joiners, selectors, emoji sequences)', () => {
    fc.assert(
      fc.property(stringifiedAsIs, (text) => {
        // terminalText writes an astral character as \u{XXXXX}, JSON as a surrogate pair.
        const shown = terminalText(text, Infinity).replace(
          /\\u\{([0-9a-f]+)\}/g,
          (_, hex: string) => jsonEscape(String.fromCodePoint(parseInt(hex, 16))),
        );
        expect(jsonText(text)).toBe(`"${shown}"`);
      }),
      { numRuns: 500 },
    );
  });

  it('escapes a zero-width or tag character in a key or a value, and keeps emoji and joined script', () => {
    expect(jsonText({ 'user.get\u200b': ['top\u00adic', `ok${tags('hi')}`, '\ufeff\u2060'] })).toBe(
      '{"user.get\\u200b":["top\\u00adic","ok\\udb40\\udc68\\udb40\\udc69","\\ufeff\\u2060"]}',
    );
    const legitimate = { [LEGITIMATE_SAMPLES.join(' ')]: LEGITIMATE_SAMPLES };
    expect(jsonText(legitimate, 2)).toBe(JSON.stringify(legitimate, null, 2));
    // A digit of JSON's own \u0010 escape is no keycap: U+FE0F after it is escaped.
    expect(jsonText('\u0010\ufe0f\u20e3')).toBe('"\\u0010\\ufe0f\u20e3"');
    expect(jsonText('\\1\ufe0f\u20e3')).toBe('"\\\\1\ufe0f\u20e3"');
  });

  it('writes keys and values alike, and a value without JSON text as null', () => {
    expect(jsonText({ 'a\u202eb': ['\u009b2J', '\u2067x\u2069'] })).toBe(
      '{"a\\u202eb":["\\u009b2J","\\u2067x\\u2069"]}',
    );
    expect(jsonText({ k: '\u007f\u0085' }, 2)).toBe('{\n  "k": "\\u007f\\u0085"\n}');
    expect(jsonText(undefined)).toBe('null');
  });
});

describe('jsonTextLength', () => {
  it("is the length of JSON.stringify's text, compact or indented, for any JSON value", () => {
    fc.assert(
      fc.property(hostileJson, fc.integer({ min: 0, max: 8 }), (value, indent) => {
        // As JSON.parse makes it (no -0, no undefined).
        const parsed = JSON.parse(JSON.stringify(value)) as unknown;
        expect(jsonTextLength(parsed, indent)).toBe(JSON.stringify(parsed, null, indent).length);
      }),
      { numRuns: 500 },
    );
  });

  it('stops counting once past the bound, a length known to be larger', () => {
    const deep = JSON.parse(`${'['.repeat(60)}${'0,'.repeat(1_000_000)}0${']'.repeat(60)}`);
    expect(jsonTextLength(deep)).toBe(2_000_121);
    // Indented: each of the million elements after 120 spaces.
    expect(jsonTextLength(deep, 2, 10_000)).toBeGreaterThan(10_000);
    expect(jsonTextLength(deep, 2)).toBe(JSON.stringify(deep, null, 2).length);
  });
});
