/**
 * terminalText (src/cli/terminal-text.ts), through which the CLI prints what a server wrote:
 * its output holds no control character and no character shown as nothing (format characters,
 * default-ignorables) whatever the input, but inside legitimate emoji and joined script; is the
 * input itself when that is printable and within the bound; and past the bound is the escaped
 * start of the input, at most `max` characters, then a marker counting exactly the characters
 * left out.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_TERMINAL_TEXT, terminalText } from '../../src/cli/terminal-text.js';
import { HIDDEN, LEGITIMATE_SAMPLES, holdsNoHiddenRaw, hostileUnit, tags } from './hidden-text.js';

const LAYOUT = [
  0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067,
  0x2068, 0x2069,
];
const CUT = / \.\.\.\[(\d+) more characters cut\]$/;

/** Hidden characters among printable ones and legitimate sequences, and any UTF-16 unit. */
const hostile = fc.oneof(
  fc.string({ unit: hostileUnit, maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'binary-ascii', maxLength: 60 }),
);

/** Text without a hidden character: any code point but those of HIDDEN. */
const printable = fc
  .string({ unit: 'binary', maxLength: 60 })
  .map((s) => s.replace(new RegExp(HIDDEN.source, 'gv'), ''));

/** The escape terminalText writes for one character alone. */
const escapeOf = (code: number): string =>
  ({ 0x09: '\\t', 0x0a: '\\n', 0x0d: '\\r' })[code] ??
  (code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`);

describe('terminalText', () => {
  it('never writes a hidden character outside legitimate sequences, whatever the text and bound', () => {
    fc.assert(
      fc.property(hostile, fc.nat({ max: 80 }), (text, max) => {
        for (const out of [terminalText(text, max), terminalText(text)]) {
          expect(out).not.toContain('\n');
          expect(holdsNoHiddenRaw(out)).toBe(true);
        }
      }),
    );
  });

  it('is the identity on printable text within the bound', () => {
    fc.assert(
      fc.property(printable, (text) => {
        expect(terminalText(text)).toBe(text);
        expect(terminalText(text, text.length)).toBe(text);
      }),
    );
  });

  it('past the bound: the escaped start, at most max characters, then the count of the rest', () => {
    fc.assert(
      fc.property(hostile, fc.nat({ max: 80 }), (text, max) => {
        const out = terminalText(text, max);
        const whole = terminalText(text, Infinity);
        const cut = CUT.exec(out);
        if (cut === null) {
          expect(out).toBe(whole);
          expect(out.length).toBeLessThanOrEqual(max);
          return;
        }
        const left = Number(cut[1]);
        const shown = out.slice(0, cut.index);
        expect(left).toBeGreaterThan(0);
        expect(shown.length).toBeLessThanOrEqual(max);
        // What is shown is the start of the text, escaped as a whole would be, cut between characters.
        expect(shown).toBe(terminalText(text.slice(0, text.length - left), Infinity));
        expect(whole.startsWith(shown)).toBe(true);
        // The next piece (a character, its escape, or a legitimate sequence kept whole) would not
        // have fitted: the first cut past it where the two halves escape as the whole does.
        const at = text.length - left;
        let end = at + (text.codePointAt(at)! > 0xffff ? 2 : 1);
        while (
          terminalText(text.slice(0, end), Infinity) + terminalText(text.slice(end), Infinity) !==
          whole
        ) {
          end += text.codePointAt(end)! > 0xffff ? 2 : 1;
        }
        expect(terminalText(text.slice(0, end), Infinity).length).toBeGreaterThan(max);
      }),
    );
  });

  it('escapes exactly the hidden characters, each alone: \\uXXXX, \\u{XXXXX}, \\n, \\r, \\t', () => {
    const differ: number[] = [];
    for (let code = 0; code <= 0x10ffff; code++) {
      const text = String.fromCodePoint(code);
      const wanted = HIDDEN.test(text) ? escapeOf(code) : text;
      if (terminalText(text) !== wanted) differ.push(code);
    }
    expect(differ).toEqual([]);
  });

  it('escapes zero-width, invisible format and tag characters, and lone surrogates', () => {
    // A method name with a zero-width space looks like the one without.
    expect(terminalText('user.get\u200b')).toBe('user.get\\u200b');
    expect(terminalText('a\u00adb\u200bc\u2060d\ufeffe\u180ef\u2064g\ufff9h\ufffbi')).toBe(
      'a\\u00adb\\u200bc\\u2060d\\ufeffe\\u180ef\\u2064g\\ufff9h\\ufffbi',
    );
    // Tag characters carry text no one sees.
    expect(terminalText(`ok${tags('rm -rf')}`)).toBe(
      'ok\\u{e0072}\\u{e006d}\\u{e0020}\\u{e002d}\\u{e0072}\\u{e0066}',
    );
    // Default-ignorables shown as nothing: Hangul filler, grapheme joiner, variation selectors.
    expect(terminalText('x\u3164\u034f\ufe00\u{e0100}')).toBe('x\\u3164\\u034f\\ufe00\\u{e0100}');
    expect(terminalText('\ud800x\udfff')).toBe('\\ud800x\\udfff');
  });

  it('keeps ZWJ, ZWNJ, U+FE0F and tags inside emoji and joined script, and escapes them elsewhere', () => {
    for (const text of LEGITIMATE_SAMPLES) expect(terminalText(text)).toBe(text);
    // Between Latin letters a joiner shows nothing; a selector after ASCII varies nothing.
    expect(terminalText('to\u200cpic\u200dx')).toBe('to\\u200cpic\\u200dx');
    expect(terminalText('get\ufe0f')).toBe('get\\ufe0f');
    // Between letters of two scripts a joiner joins nothing.
    expect(terminalText('क\u200dم\u200cx')).toBe('क\\u200dم\\u200cx');
    // Past one emoji sequence, more selectors and joiners are escaped.
    expect(terminalText('❤️\ufe0f\ufe0f')).toBe('❤️\\ufe0f\\ufe0f');
    expect(terminalText('👨\u200d')).toBe('👨\\u200d');
    // A black flag with tags that name no recommended flag hides them: escaped.
    expect(terminalText(`🏴${tags('hi')}\u{e007f}`)).toBe('🏴\\u{e0068}\\u{e0069}\\u{e007f}');
  });

  it('cuts between sequences, never inside an emoji kept whole', () => {
    expect(terminalText('ab👨‍👩‍👧', 9)).toBe('ab ...[8 more characters cut]');
    expect(terminalText('ab👨‍👩‍👧', 10)).toBe('ab👨‍👩‍👧');
  });

  it('escapes each control character visibly: \\n, \\r, \\t, and \\u00XX for the rest', () => {
    expect(terminalText('\u001b]0;T\u0007\r\n\t\u007f\u009b\u0085\u0000')).toBe(
      '\\u001b]0;T\\u0007\\r\\n\\t\\u007f\\u009b\\u0085\\u0000',
    );
    expect(terminalText('a\u00a0\\u001b語😀')).toBe('a\u00a0\\u001b語😀');
  });

  it('escapes the bidirectional controls and the line and paragraph separators as \\u20XX', () => {
    // Trojan Source: RLO shows "txt.exe" as "exe.txt"; an isolate hides what follows it.
    expect(terminalText('invoice\u202etxt.exe')).toBe('invoice\\u202etxt.exe');
    expect(terminalText(String.fromCharCode(...LAYOUT))).toBe(
      LAYOUT.map((code) => `\\u${code.toString(16).padStart(4, '0')}`).join(''),
    );
    // Right-to-left text itself is not a control: Arabic and Hebrew letters pass.
    expect(terminalText('مرحبا שלום')).toBe('مرحبا שלום');
  });

  it('cuts 1 MiB to MAX_TERMINAL_TEXT (4096) characters and says how many were left out', () => {
    const text = 'M'.repeat(1024 * 1024);
    expect(terminalText(text)).toBe(
      `${'M'.repeat(MAX_TERMINAL_TEXT)} ...[${1024 * 1024 - MAX_TERMINAL_TEXT} more characters cut]`,
    );
    expect(MAX_TERMINAL_TEXT).toBe(4096);
  });
});
