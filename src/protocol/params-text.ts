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
import { isNumberChar, memberValueSpans, startsNumber, stringEnd } from './json-members.js';
import type { Params } from './types.js';

const QUOTE = 34;
const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;

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

/** Whether `text` may hold a number JSON.stringify would write otherwise once parsed. */
export function mayNotRoundTrip(text: string): boolean {
  return MAY_NOT_ROUND_TRIP.test(text);
}

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

/** Whether String() writes the number `token` reads as in the same text. */
function roundTrips(token: string): boolean {
  const value = Number(token);
  return Number.isFinite(value) && String(value) === token;
}

/**
 * The text of each message's last "params" member, by the message's index (its place in the
 * batch, or 0), when that value is an object or an array holding a number that does not
 * round-trip. `text` is valid JSON (JSON.parse took it), which the scan relies on.
 */
export function scanParamsTexts(text: string, batch: boolean): (string | undefined)[] {
  return memberValueSpans(text, batch, 'params').map((span) =>
    span && isContainer(text.charCodeAt(span[0])) && holdsChangingNumber(text, span[0], span[1])
      ? text.slice(span[0], span[1])
      : undefined,
  );
}

const isContainer = (c: number): boolean => c === OPEN_BRACE || c === OPEN_BRACKET;

/** Whether text[start..end) holds, outside its strings, a number that does not round-trip. */
function holdsChangingNumber(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(text, i);
    else if (startsNumber(c)) {
      let after = i + 1;
      while (after < end && isNumberChar(text.charCodeAt(after))) after++;
      if (!roundTrips(text.slice(i, after))) return true;
      i = after - 1;
    }
  }
  return false;
}
