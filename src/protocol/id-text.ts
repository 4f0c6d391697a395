/*
 * Request ids echoed byte for byte. JSON.parse reads every number as a double, so a numeric id
 * the double cannot hold as written would come back as another text: 12345678901234567890
 * as 12345678901234567000, 1.0 as 1, 1e2 as 100, -0 as 0, 1e400 as Infinity (not even JSON).
 * The specification asks for the same value back, so for those ids the reply is written with
 * the id's text as it was sent, found in the message text here.
 *
 * Costs: nothing for string ids and for responses. For a numeric id, a look at the end of the
 * text (the id is usually the last member) or, when it is elsewhere, one regular-expression
 * search. Only an id that does not round-trip (or text that might hold one) pays for a scan of
 * the message text.
 */
import { isNumberChar, isWhitespace, memberValueSpans, startsNumber } from './json-members.js';

const QUOTE = 34;
const COMMA = 44;
const COLON = 58;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const MINUS = 45;
const DIGIT_0 = 48;
const DIGIT_9 = 57;
const LOWER_I = 105;
const LOWER_D = 100;

/**
 * An "id" member whose number has a fraction or an exponent, anywhere in the text (one in the
 * params is a false alarm, which costs a scan). A safe integer other than -0 written as a plain
 * integer is exactly String(id); any other way to write it has `.`, `e` or `E`, so without a
 * match the ids that are safe integers need no scan.
 */
const FRACTION_OR_EXPONENT_ID = /"id"\s*:\s*-?\d+[.eE]/;

/**
 * The id of a message the server may answer (a request, or an invalid message it answers with
 * its id), when it is a number; undefined otherwise (no id, a string id, a response).
 */
function numericId(value: unknown): number | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const message = value as Record<string, unknown>;
  const id = message['id'];
  if (typeof id !== 'number') return undefined;
  // A response to one of this side's own calls: its id is ours, nothing is echoed.
  if (!('method' in message) && ('result' in message || 'error' in message)) return undefined;
  return id;
}

function plainSafeInteger(id: number): boolean {
  return Number.isSafeInteger(id) && !Object.is(id, -0);
}

/**
 * For each message of `value` (parsed from `text`: one message, or a batch), the text of its
 * id as sent, when the number it was parsed into would not write it back the same
 * (`String(id) !== text`); undefined for every other message. Undefined as a whole when no
 * message needs one: the common case, decided without scanning the text.
 */
export function idTextsOf(text: string, value: unknown): (string | undefined)[] | undefined {
  if (Array.isArray(value)) return idTextsByScan(text, value);
  const id = numericId(value);
  if (id === undefined) return undefined;
  const raw = singleIdText(text, id);
  return raw !== undefined && differs(raw, id) ? [raw] : undefined;
}

/**
 * What idTextsOf gives, found the plain way for a single message too: without its look at the
 * end of the text first, so a little slower for the rare request with a numeric id, and
 * smaller (the browser client, which the server seldom calls, parses with this).
 */
export function idTextsByScan(text: string, value: unknown): (string | undefined)[] | undefined {
  const batch = Array.isArray(value);
  // A lone message without a numeric id (every response, every notification): nothing to find.
  if (!batch && numericId(value) === undefined) return undefined;
  const messages: unknown[] = batch ? value : [value];
  let scan = false;
  let anyNumeric = false;
  for (const member of messages) {
    const id = numericId(member);
    if (id === undefined) continue;
    anyNumeric = true;
    if (!plainSafeInteger(id)) {
      scan = true;
      break;
    }
  }
  if (!anyNumeric || (!scan && !mayHideFraction(text))) return undefined;
  const raws = scanIdTexts(text, batch);
  let out: (string | undefined)[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    // Only members the scan found a number id in: the others need no second look.
    const raw = raws[i];
    if (raw === undefined) continue;
    const id = numericId(messages[i]);
    if (id === undefined || !differs(raw, id)) continue;
    (out ??= new Array<string | undefined>(messages.length))[i] = raw;
  }
  return out;
}

/** The id text of a single message whose id is the number `id`, unless it is plainly String(id). */
function singleIdText(text: string, id: number): string | undefined {
  const plain = plainSafeInteger(id);
  const end = lastValueEnd(text);
  const start = end < 0 ? -1 : lastMemberIdStart(text, end);
  if (start >= 0) {
    if (plain && integerToken(text, start, end)) return undefined;
    return text.slice(start, end);
  }
  if (plain && !mayHideFraction(text)) return undefined;
  return scanIdTexts(text, false)[0];
}

/** Whether text[start..end) is written as a plain integer: an optional minus, digits. */
function integerToken(text: string, start: number, end: number): boolean {
  for (let i = text.charCodeAt(start) === MINUS ? start + 1 : start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < DIGIT_0 || c > DIGIT_9) return false;
  }
  return true;
}

/** Whether the text may hold an id written with a fraction or an exponent. */
function mayHideFraction(text: string): boolean {
  // A key spelled with escapes ("\u0069d") is invisible to the expression: scan those.
  return text.includes('\\u') || FRACTION_OR_EXPONENT_ID.test(text);
}

/**
 * `raw` writes the number `id` (a check on the scanner: the same double both ways) but not as
 * String(id) does, so the reply needs it.
 */
function differs(raw: string, id: number): boolean {
  return raw !== String(id) && Object.is(Number(raw), id);
}

/**
 * Where the last value of the top-level object ends: just before its closing `}` (and any
 * whitespace around it). -1 when the text does not end with `}`.
 */
function lastValueEnd(text: string): number {
  let i = text.length - 1;
  while (i >= 0 && isWhitespace(text.charCodeAt(i))) i--;
  if (i < 0 || text.charCodeAt(i) !== CLOSE_BRACE) return -1;
  i--;
  while (i >= 0 && isWhitespace(text.charCodeAt(i))) i--;
  return i + 1;
}

/**
 * The start of the number that ends at `end` when it is the value of an `"id"` member
 * (spelled plainly): `..., "id" : 123 }` read backwards; -1 when the text is not so. In valid
 * JSON the final `}` closes the top-level object, so that member is one of its own, and the
 * last of its "id" members: the one JSON.parse kept.
 */
function lastMemberIdStart(text: string, end: number): number {
  let i = end - 1;
  while (i >= 0 && isNumberChar(text.charCodeAt(i))) i--;
  const start = i + 1;
  if (start === end) return -1;
  while (i >= 0 && isWhitespace(text.charCodeAt(i))) i--;
  if (i < 0 || text.charCodeAt(i) !== COLON) return -1;
  i--;
  while (i >= 0 && isWhitespace(text.charCodeAt(i))) i--;
  if (
    i < 3 ||
    text.charCodeAt(i) !== QUOTE ||
    text.charCodeAt(i - 1) !== LOWER_D ||
    text.charCodeAt(i - 2) !== LOWER_I ||
    text.charCodeAt(i - 3) !== QUOTE
  ) {
    return -1;
  }
  // The quote before `id` opens the key only if a `{` or `,` comes before it (an escaped
  // quote inside a longer key has a backslash there).
  i -= 4;
  while (i >= 0 && isWhitespace(text.charCodeAt(i))) i--;
  const before = i >= 0 ? text.charCodeAt(i) : -1;
  return before === OPEN_BRACE || before === COMMA ? start : -1;
}

/**
 * The number text of each message's last "id" member, by the message's index (its place in
 * the batch, or 0). `text` is valid JSON (JSON.parse took it), which the scan relies on.
 */
export function scanIdTexts(text: string, batch: boolean): (string | undefined)[] {
  return memberValueSpans(text, batch, 'id').map((span) =>
    span && startsNumber(text.charCodeAt(span[0])) ? text.slice(span[0], span[1]) : undefined,
  );
}
