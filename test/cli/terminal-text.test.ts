/**
 * terminalText (src/cli/terminal-text.ts), through which the CLI prints what a server wrote:
 * its output holds no control character whatever the input, is the input itself when that is
 * printable and within the bound, and past the bound is the escaped start of the input, at most
 * `max` characters, then a marker counting exactly the characters left out.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_TERMINAL_TEXT, terminalText } from '../../src/cli/terminal-text.js';

/**
 * Unicode's control characters (general category Cc: C0, DEL, C1), the bidirectional controls
 * (embeddings, overrides, isolates, the marks LRM, RLM, ALM) and the line and paragraph separators.
 */
const CONTROL = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;
const LAYOUT = [
  0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067,
  0x2068, 0x2069,
];
const CUT = / \.\.\.\[(\d+) more characters cut\]$/;

/** Control characters among printable ones (1- to 4-byte, a backslash), and any UTF-16 unit. */
const hostile = fc.oneof(
  fc.string({
    unit: fc.oneof(
      fc.integer({ min: 0, max: 0x1f }).map((code) => String.fromCharCode(code)),
      fc.integer({ min: 0x7f, max: 0x9f }).map((code) => String.fromCharCode(code)),
      fc.constantFrom(...LAYOUT).map((code) => String.fromCharCode(code)),
      fc.constantFrom('a', ' ', '\\', 'é', '\u00a0', '語', '😀'),
    ),
    maxLength: 60,
  }),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'binary-ascii', maxLength: 60 }),
);

/** Text without a control character: any code point but those of CONTROL. */
const printable = fc
  .string({ unit: 'binary', maxLength: 60 })
  .map((s) => s.replace(new RegExp(CONTROL.source, 'gu'), ''));

describe('terminalText', () => {
  it('never writes a control character, whatever the text and the bound', () => {
    fc.assert(
      fc.property(hostile, fc.nat({ max: 80 }), (text, max) => {
        expect(terminalText(text, max)).not.toMatch(CONTROL);
        expect(terminalText(text)).not.toMatch(CONTROL);
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
        // The next character (or its escape) would not have fitted.
        const next = terminalText(
          String.fromCodePoint(text.codePointAt(text.length - left)!),
          Infinity,
        );
        expect(shown.length + next.length).toBeGreaterThan(max);
      }),
    );
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
