/**
 * Text a server chose (an error message, a close reason, a response body, a header), made safe
 * to write to a terminal. A terminal takes control characters as commands: ESC starts escape
 * sequences (set the window title, erase a line, hide all that follows), CR and LF move the
 * cursor so a forged line can stand in for the CLI's own, BEL rings, and the C1 range
 * (U+0080-U+009F) holds one-character forms of the same commands (U+009B is CSI). The
 * bidirectional controls reorder or hide what a person reads (Trojan Source: an override shows
 * what follows it backwards, an isolate left open hides the rest of the line), and U+2028 and
 * U+2029 break a line where some terminals do. The other format characters and the
 * default-ignorable code points are shown as nothing: a zero-width space or a soft hyphen makes
 * a method or topic name that looks like another, tag characters and variation selectors carry
 * text no one sees. So all these (ESCAPED_CHARACTER) are written as visible escapes, but where
 * one is part of legitimate text (KEPT_SEQUENCE). TAB, CR and LF included: a server's text is
 * printed inside one line of the CLI's, and a TAB moves the cursor by the terminal's tab stops,
 * which the server can set with an escape sequence it sent before. Other characters pass
 * unchanged (right-to-left letters too); a backslash is not escaped, so the output is for
 * reading, not for decoding back.
 */

/**
 * Longest server text written in one piece, in characters (UTF-16 code units) after escaping;
 * past it the text is cut and a marker says how many characters were left out.
 */
export const MAX_TERMINAL_TEXT = 4096;

/**
 * The characters a terminal acts on or shows as nothing: Unicode's control characters (general
 * category Cc: C0, DEL, C1), format characters (Cf: the bidirectional controls, ZWSP, ZWJ, ZWNJ,
 * word joiner, BOM, soft hyphen, interlinear annotation, tag characters), surrogates standing
 * alone (Cs), the default-ignorable code points (variation selectors, Hangul fillers, the
 * combining grapheme joiner, those not yet assigned) and the line and paragraph separators.
 */
export const ESCAPED_CHARACTER = new RegExp(
  '[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Default_Ignorable_Code_Point}\\u2028\\u2029]',
  'v',
);

/**
 * The scripts whose shaping ZWJ and ZWNJ change (Unicode's chapters on Arabic, Syriac, N'Ko,
 * Mongolian, the Indic scripts and Sinhala): Persian writes ZWNJ inside words, Devanagari ZWJ
 * after a virama for a half form. Between letters of other scripts they show nothing.
 */
const JOINING_SCRIPTS = [
  'Arabic',
  'Syriac',
  'Nko',
  'Mongolian',
  'Devanagari',
  'Bengali',
  'Gurmukhi',
  'Gujarati',
  'Oriya',
  'Tamil',
  'Telugu',
  'Kannada',
  'Malayalam',
  'Sinhala',
];
/** A ZWJ or ZWNJ with a letter or mark of one joining script on each side, and the one after. */
const JOINER_IN_SCRIPT = JOINING_SCRIPTS.map((script) => {
  const letter = `[[[\\p{L}\\p{M}]&&\\p{Script_Extensions=${script}}]--\\p{Default_Ignorable_Code_Point}]`;
  return `[\\u200c\\u200d](?<=${letter}[\\u200c\\u200d])${letter}`;
}).join('|');

/**
 * The characters of ESCAPED_CHARACTER that emoji are made of: ZWJ, the emoji presentation
 * selector, tag characters.
 */
const EMOJI_HIDDEN = '[\\u200d\\ufe0f\\u{e0020}-\\u{e007f}]';

/**
 * Where characters of ESCAPED_CHARACTER are part of legitimate text, kept whole and unescaped:
 * an emoji sequence Unicode recommends for interchange (RGI_Emoji: ZWJ families and professions,
 * keycaps, emoji presentation with U+FE0F, the England, Scotland and Wales flags spelled in tag
 * characters), and a ZWJ or ZWNJ with a letter or mark of the same joining script on each side
 * (the letter after it taken along, so that a cut keeps the joiner only with both). Both render
 * visibly (one emoji, a changed letter shape), and the emoji set is finite, so no hidden text
 * rides along. The lookahead tries the RGI search only where a ZWJ, U+FE0F or tag character
 * follows the first code point (or a skin tone after it): RGI sequences without one need no
 * keeping, and the search is slow to run at every character. So a kept sequence holds a
 * character to escape at most two code points after its start, which jsonText relies on.
 */
const KEPT_SEQUENCE =
  `(?=[0-9#*\\p{Extended_Pictographic}]\\p{Emoji_Modifier}?${EMOJI_HIDDEN})\\p{RGI_Emoji}` +
  `|${JOINER_IN_SCRIPT}`;

const keptAt = new RegExp(KEPT_SEQUENCE, 'vy');

/**
 * The sequence of KEPT_SEQUENCE starting at `at` in `text` (its context before `at` included),
 * when it holds a character of ESCAPED_CHARACTER; one without is no different from its
 * characters one by one.
 */
export function keptSequenceAt(text: string, at: number): string | undefined {
  keptAt.lastIndex = at;
  const kept = keptAt.exec(text)?.[0];
  return kept !== undefined && ESCAPED_CHARACTER.test(kept) ? kept : undefined;
}

const short: Readonly<Record<number, string>> = { 0x09: '\\t', 0x0a: '\\n', 0x0d: '\\r' };

/** `\n`, `\r`, `\t`, `\u001b`, `\u202e`, or `\u{e0041}` past the BMP. */
function escaped(code: number): string {
  if (code > 0xffff) return `\\u{${code.toString(16)}}`;
  return short[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` with every character of ESCAPED_CHARACTER escaped visibly (`\n`, `\u001b`, `\u009b`,
 * `\u202e`, `\u200b`, `\u{e0041}`) but inside a sequence of KEPT_SEQUENCE, cut to `max`
 * characters of that escaped text (an escape is never split, nor a surrogate pair, nor a kept
 * sequence), and then ` ...[N more characters cut]` when anything was left out (N counts
 * `text`'s characters). The identity on text of printable characters within `max`.
 */
export function terminalText(text: string, max: number = MAX_TERMINAL_TEXT): string {
  if (text.length <= max && !ESCAPED_CHARACTER.test(text)) return text;
  let out = '';
  let at = 0;
  while (at < text.length) {
    let piece = keptSequenceAt(text, at);
    let units = piece?.length ?? 0;
    if (piece === undefined) {
      const code = text.codePointAt(at)!;
      units = code > 0xffff ? 2 : 1;
      const char = text.slice(at, at + units);
      piece = ESCAPED_CHARACTER.test(char) ? escaped(code) : char;
    }
    if (out.length + piece.length > max) break;
    out += piece;
    at += units;
  }
  return at < text.length ? `${out} ...[${text.length - at} more characters cut]` : out;
}
