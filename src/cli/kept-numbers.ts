import { randomBytes } from 'node:crypto';

/*
 * JSON.parse reads every number as a double: 1e400 becomes Infinity (which JSON.stringify writes
 * as null), 12345678901234567891 becomes 12345678901234567000, 1e-400 becomes 0. The CLI prints
 * what the server sent, so before a message from a server is parsed, each number a double cannot
 * hold is written as a string carrying its text, after a mark; each JSON text the CLI writes (a
 * result, a message, an error's data, a message back to the server) has those strings written
 * back as the numbers they stand for. The user's PARAMS are read the same way, with every number
 * whose text JSON.stringify would change marked (keepNumberTexts), so each is sent as typed.
 * Node 20's JSON.parse gives a reviver no source text, so the number's text is carried through
 * the parse this way.
 */

/**
 * The tag after NUL that starts a string standing for a number: random for each process, so a
 * server cannot write a string that prints as a number (it never sees the tag: the CLI sends
 * marked strings only as the numbers they stand for).
 */
const TAG = randomBytes(6).toString('hex');
/** A marked string as JSON.stringify writes it, up to the number's text. */
const MARK_JSON = `"\\u0000${TAG}`;
/** A marked string in JSON text; the number's text is its first group. */
const MARKED = new RegExp(`"\\\\u0000${TAG}([-+.0-9eE]+)"`, 'g');

/**
 * What a number a double cannot hold has, and so what a text that holds one has: 16 digits or
 * more (a point among them or not), past a double's 15 decimal digits; or an exponent of 100 or
 * more, which a number of fewer digits needs to pass a double's range (1.8e308, or 2.2e-308 where
 * its precision starts to fall). A text without either is handed on untouched, unscanned.
 */
const MAY_HOLD = /[\d.]{16}|[eE][+-]?0*[1-9]\d\d/;
/** The characters of a number, from where one starts (`-` or a digit). */
const RUN = /[-+.\deE]+/y;
/** A number as JSON writes it (no leading zeros, no bare point). */
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/** A number, or what String() writes of a double, in its parts. */
const PARTS = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;
/** JSON's whitespace, then a colon: what makes the value before it an object's key. */
const COLON_AFTER = /[ \t\n\r]*:/y;

const QUOTE = 34;
const BACKSLASH = 92;
const MINUS = 45;
const ZERO = 48;
const NINE = 57;

/**
 * `text` (a message from a server) with each number a double cannot hold as a marked string, so
 * that JSON.parse keeps its text. Only a whole number in a value's place is marked: text that is
 * not JSON stays as it was (a number where a key goes, `01e400`, `1e400.5`), for JSON.parse to
 * refuse as it would have.
 */
export function keepNumbers(text: string): string {
  if (!MAY_HOLD.test(text)) return text;
  return markNumbers(text, (run) => !heldByDouble(run));
}

/**
 * `text` (the user's own JSON, PARAMS) with each number that JSON.stringify would not write
 * back as typed as a marked string: besides those a double cannot hold, `-0` (written `0`),
 * `1.0`, `1e2` and the like, so that what goes to the server is the text typed, number for
 * number. Text that is not JSON stays as it was, as in keepNumbers.
 */
export function keepNumberTexts(text: string): string {
  return markNumbers(text, (run) => {
    const value = Number(run);
    return !Number.isFinite(value) || String(value) !== run;
  });
}

/** `text` with each whole number in a value's place for which `keep` holds as a marked string. */
function markNumbers(text: string, keep: (run: string) => boolean): string {
  let kept = '';
  let from = 0;
  let at = 0;
  while (at < text.length) {
    const c = text.charCodeAt(at);
    if (c === QUOTE) {
      at = afterString(text, at);
      continue;
    }
    if (c !== MINUS && (c < ZERO || c > NINE)) {
      at++;
      continue;
    }
    RUN.lastIndex = at;
    const run = RUN.exec(text)![0];
    const end = at + run.length;
    COLON_AFTER.lastIndex = end;
    if (NUMBER.test(run) && keep(run) && !COLON_AFTER.test(text)) {
      kept += `${text.slice(from, at)}${MARK_JSON}${run}"`;
      from = end;
    }
    at = end;
  }
  return from === 0 ? text : kept + text.slice(from);
}

/**
 * `json` (JSON.stringify's text of what came from keepNumbers' messages) with each marked string
 * written as the number it stands for.
 */
export function writeKeptNumbers(json: string): string {
  return json.includes(MARK_JSON) ? json.replace(MARKED, '$1') : json;
}

/** Where the string that starts at `start` (its opening quote) ends: after its closing quote. */
function afterString(text: string, start: number): number {
  for (let at = start + 1; at < text.length; at++) {
    const c = text.charCodeAt(at);
    if (c === BACKSLASH) at++;
    else if (c === QUOTE) return at + 1;
  }
  return text.length;
}

/**
 * Whether the double JSON.parse reads `literal` as is the number `literal` writes (the text
 * JSON.stringify writes of it may differ, as 100 for 1e2 does, but not in value). The sign of a
 * zero is not told apart: -0 is the double -0, though JSON.stringify writes it as 0.
 */
function heldByDouble(literal: string): boolean {
  const value = Number(literal);
  if (!Number.isFinite(value)) return false;
  const written = String(value);
  return literal === written || decimal(literal) === decimal(written);
}

/** The value of `text` (a number) spelt one way: sign, significant digits, `e` and a power. */
function decimal(text: string): string {
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = PARTS.exec(text)!;
  const digits = whole + fraction;
  const first = digits.search(/[1-9]/);
  if (first === -1) return '0';
  const significant = digits.slice(first).replace(/0+$/, '');
  // The power of ten of the first significant digit's place; BigInt: `1e99999999999999999999`.
  const power = BigInt(exponent) + BigInt(whole.length - first);
  return `${sign}${significant}e${power}`;
}
