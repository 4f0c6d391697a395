/**
 * What the CLI must not print raw from a server, shared by the terminalText and jsonText tests,
 * written from Unicode's properties rather than from the code under test.
 */
import fc from 'fast-check';

/**
 * A character a terminal acts on or shows as nothing: the control characters (Cc), the format
 * characters (Cf: bidirectional controls, zero-width characters, the soft hyphen, tag characters),
 * surrogates (Cs, alone), the default-ignorable code points (variation selectors, Hangul fillers,
 * the combining grapheme joiner) and the line and paragraph separators.
 */
export const HIDDEN = new RegExp(
  '[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Default_Ignorable_Code_Point}\\u2028\\u2029]',
  'v',
);

/** The scripts whose shaping uses ZWJ and ZWNJ (Arabic-script languages, Indic scripts). */
const JOINING = [
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
const joinerIn = (script: string): string => {
  const letter = `[[[\\p{L}\\p{M}]&&\\p{Script_Extensions=${script}}]--\\p{Default_Ignorable_Code_Point}]`;
  return `(?<=${letter})[\\u200c\\u200d](?=${letter})`;
};

/**
 * Where a hidden character is part of legitimate text: an emoji sequence recommended for
 * interchange (ZWJ families, keycaps, the England, Scotland and Wales flags of tag characters,
 * emoji presentation U+FE0F), and ZWJ or ZWNJ between two letters or marks of one joining script.
 */
export const LEGITIMATE = new RegExp(`\\p{RGI_Emoji}|${JOINING.map(joinerIn).join('|')}`, 'gv');

/** `text` without a raw hidden character outside the legitimate sequences (but newlines). */
export function holdsNoHiddenRaw(text: string): boolean {
  return !HIDDEN.test(text.replace(LEGITIMATE, '').replaceAll('\n', ''));
}

/** Tag characters spelling `ascii`: invisible text that rides along with what is shown. */
export const tags = (ascii: string): string =>
  [...ascii].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join('');

/** Legitimate text holding ZWJ, ZWNJ, U+FE0F or tag characters, each shown unchanged. */
export const LEGITIMATE_SAMPLES = [
  '👨‍👩‍👧', // family: man ZWJ woman ZWJ girl
  '👩🏽‍💻', // woman technologist with a skin tone
  '🏳️‍🌈', // rainbow flag: white flag U+FE0F ZWJ rainbow
  '❤️', // heart with emoji presentation
  '1️⃣', // keycap 1
  `🏴${tags('gbeng')}\u{e007f}`, // flag of England
  'می‌خواهم', // Persian "I want": ZWNJ between letters
  'क्‍ष', // Devanagari: virama ZWJ makes the half form
  'ශ්‍රී', // Sinhala "Sri": virama ZWJ
];

/**
 * Units of hostile text: controls, every format character of the BMP and astral ones, other
 * default-ignorables, lone surrogates, the letters and emoji that joiners and selectors attach
 * to, whole legitimate sequences, and printable text.
 */
export const hostileUnit = fc.oneof(
  fc.integer({ min: 0, max: 0x1f }).map((code) => String.fromCharCode(code)),
  fc.integer({ min: 0x7f, max: 0x9f }).map((code) => String.fromCharCode(code)),
  fc
    .constantFrom(
      0xad,
      0x600,
      0x61c,
      0x6dd,
      0x70f,
      0x180e,
      0x200b,
      0x200c,
      0x200d,
      0x200e,
      0x202e,
      0x2028,
      0x2029,
      0x2060,
      0x2064,
      0x2066,
      0x2069,
      0x206f,
      0xfeff,
      0xfff9,
      0xfffb,
      0x110bd,
      0x13430,
      0x1bca0,
      0x1d173,
      0xe0001,
      0xe0020,
      0xe0041,
      0xe007f,
    )
    .map((code) => String.fromCodePoint(code)),
  fc
    .constantFrom(0x34f, 0x115f, 0x3164, 0x180b, 0xfe00, 0xfe0e, 0xfe0f, 0xe0100, 0xe01ef)
    .map((code) => String.fromCodePoint(code)),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code)),
  fc.constantFrom('👨', '👩', '🏽', '🏴', '❤', '1', '#', '\u20e3', 'م', 'ی', 'क', '\u094d', '語'),
  fc.constantFrom(...LEGITIMATE_SAMPLES),
  fc.constantFrom('a', ' ', '"', '\\', '/', 'é', '\u00a0', 'ש', '😀'),
);
