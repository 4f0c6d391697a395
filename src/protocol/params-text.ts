/*
 * Params passed on as sent. JSON.parse reads every number as a double, so params written back
 * with JSON.stringify can say something else than the client did: 12345678901234567890 becomes
 * 12345678901234567000, 1e400 becomes null, 1.0 becomes 1, -0 becomes 0. A gateway that routes
 * a call to an upstream promises the client's params untouched, so for params holding such a
 * number the text they were parsed from is kept here, beside the parsed object, and the
 * upstream is sent that text.
 *
 * Costs: an ordinary message pays one regular-expression search of its text (no match: no
 * number in it can fail to round-trip). Only a match pays for a scan of the text, and only a
 * number that does not round-trip keeps a text.
 */
import type { Frame, Incoming } from './classify.js';
import { stringEnd } from './id-text.js';
import type { Params } from './types.js';

const QUOTE = 34;
const COMMA = 44;
const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;
const MINUS = 45;
const PLUS = 43;
const DOT = 46;
const DIGIT_0 = 48;
const DIGIT_9 = 57;
const LOWER_E = 101;
const UPPER_E = 69;

/**
 * Text that may hold a number String() would write otherwise. A number written without an
 * exponent, with at most 15 significant digits, no trailing zero in its fraction, not -0 and
 * not below 1e-6 reads as the double that String() writes back with the same digits (15 digits
 * are what a double always keeps); each alternative matches one way out of that:
 *  - an exponent (`1e2`, `1E+2`, `1e400`);
 *  - a fraction ending in 0 (`1.0`, `-0.50`): not followed by `"`, so `"jsonrpc":"2.0"` is no
 *    match (a number is never directly followed by a quote);
 *  - 16 digits or more, a dot among them or not (`12345678901234567890`, and every integer
 *    String() writes with an exponent, 1e21 and up);
 *  - six zeros after a point (`0.0000001`, which String() writes as `1e-7`);
 *  - `-0`.
 * Strings in the text can match too: a false alarm, which costs a scan.
 */
const MAY_NOT_ROUND_TRIP = /\d[eE]|\.\d*0(?![\d"])|[\d.]{16}|0\.0{6}|-0(?![.\d])/;

/** Each parsed params object holding a number that does not round-trip, with its text. */
const kept = new WeakMap<object, string>();

/**
 * Keep the text of the params of each request and notification in `parsed` (parsed from
 * `text`) that hold a number String() would write otherwise; see paramsTextOf.
 */
export function keepParamsTexts(text: string, parsed: Incoming | Frame): void {
  if ('kind' in parsed) {
    const params = paramsOf(parsed);
    if (params === undefined || !MAY_NOT_ROUND_TRIP.test(text)) return;
    const found = scanParamsTexts(text, false)[0];
    if (found !== undefined) kept.set(params, found);
    return;
  }
  const { messages } = parsed;
  if (!messages.some((message) => paramsOf(message) !== undefined)) return;
  if (!MAY_NOT_ROUND_TRIP.test(text)) return;
  // A frame that is no batch holds one message; a batch's messages are its members, in order.
  const texts = scanParamsTexts(text, parsed.batch);
  for (let i = 0; i < messages.length; i++) {
    const params = paramsOf(messages[i]!);
    const found = texts[i];
    if (params !== undefined && found !== undefined) kept.set(params, found);
  }
}

/**
 * The text `params` were parsed from, when they hold a number JSON.stringify would write
 * otherwise and still hold what was parsed; undefined otherwise (JSON.stringify writes them as
 * sent, or they are not a client's).
 */
export function paramsTextOf(params: Params): string | undefined {
  const text = kept.get(params);
  if (text === undefined) return undefined;
  // Params are the handler's to change (a middleware may fill in or drop a member): the text
  // speaks for them only while they are what it reads as. A rare case, so the cost is no matter.
  return JSON.stringify(JSON.parse(text)) === JSON.stringify(params) ? text : undefined;
}

function paramsOf(message: Incoming): Params | undefined {
  return message.kind === 'request' || message.kind === 'notification' ? message.params : undefined;
}

function isNumberChar(c: number): boolean {
  return (
    (c >= DIGIT_0 && c <= DIGIT_9) ||
    c === MINUS ||
    c === PLUS ||
    c === DOT ||
    c === LOWER_E ||
    c === UPPER_E
  );
}

/** Whether String() writes the number `token` reads as in the same text. */
function roundTrips(token: string): boolean {
  const value = Number(token);
  return Number.isFinite(value) && String(value) === token;
}

/** Whether the string token text[open..close] reads "params" (escapes decoded). */
function isParamsKey(text: string, open: number, close: number): boolean {
  if (close - open === 7) return text.startsWith('params', open + 1);
  // Otherwise only escapes can spell it ("\u0070arams"), in at most 36 characters.
  if (close - open > 37) return false;
  const token = text.slice(open, close + 1);
  return token.includes('\\') && JSON.parse(token) === 'params';
}

/**
 * The text of each message's last "params" member, by the message's index (its place in the
 * batch, or 0), when that value is an object or an array holding a number that does not
 * round-trip. `text` is valid JSON (JSON.parse took it), which the scan relies on.
 */
export function scanParamsTexts(text: string, batch: boolean): (string | undefined)[] {
  const out: (string | undefined)[] = [];
  const messageDepth = batch ? 2 : 1;
  let depth = 0;
  let index = 0;
  /** The container at messageDepth is an object: its strings alternate key, value. */
  let inObject = false;
  let expectKey = false;
  let valueOfParams = false;
  /** Where the params value being read opens; -1 outside one. */
  let start = -1;
  /** Whether the params value being read holds a number that does not round-trip. */
  let changes = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const close = stringEnd(text, i);
      if (depth === messageDepth && inObject && expectKey) {
        valueOfParams = isParamsKey(text, i, close);
        expectKey = false;
      } else if (depth === messageDepth) {
        valueOfParams = false; // a string value
      }
      i = close;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
      if (depth === messageDepth) {
        inObject = c === OPEN_BRACE;
        expectKey = inObject;
        valueOfParams = false;
      } else if (depth === messageDepth + 1 && valueOfParams) {
        start = i;
        changes = false;
        valueOfParams = false;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth === messageDepth + 1 && start >= 0) {
        // A later "params" member replaces an earlier one, as in JSON.parse.
        out[index] = changes ? text.slice(start, i + 1) : undefined;
        start = -1;
      }
      depth--;
    } else if (c === COMMA) {
      if (depth === messageDepth - 1) index++;
      else if (depth === messageDepth && inObject) {
        expectKey = true;
        valueOfParams = false;
      }
    } else if (c === MINUS || (c >= DIGIT_0 && c <= DIGIT_9)) {
      let end = i + 1;
      while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
      if (start >= 0 && !changes) changes = !roundTrips(text.slice(i, end));
      if (depth === messageDepth) valueOfParams = false;
      i = end - 1;
    }
  }
  return out;
}
