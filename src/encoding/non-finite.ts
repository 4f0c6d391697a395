/**
 * Whether the big-endian IEEE 754 float of `size` bytes (2, 4 or 8) at `at` is NaN or an
 * infinity: its exponent bits all set. JSON has no such number, and JSON.stringify writes one as
 * null, so a binary frame carrying one (an id of NaN answered under id null, NaN params run as
 * null) is refused as no JSON text is, rather than read as something the client never sent.
 */
export function isNonFiniteFloat(bytes: Uint8Array, at: number, size: number): boolean {
  const high = bytes[at]!;
  const next = bytes[at + 1]!;
  if (size === 2) return (high & 0x7c) === 0x7c;
  if (size === 4) return (high & 0x7f) === 0x7f && (next & 0x80) === 0x80;
  return (high & 0x7f) === 0x7f && (next & 0xf0) === 0xf0;
}

/**
 * Text that may hold a number beyond a double's range, which JSON.parse reads as Infinity or
 * -Infinity (`1e400`, a Python `10**400`). Such a number, digits D before its point and exponent
 * E, is at least 10^308, so D + E > 308: with an exponent of at most two digits, D is 210 or
 * more. So its text has a run of 210 digits or a positive exponent of three digits or more; a
 * text without either holds none. Strings can match too: a false alarm, which costs a walk of
 * the parsed value (holdsNonFiniteNumber). A run is matched from its first digit only (after the
 * start or a character that is not a digit): tried at every digit, text of runs just short of
 * 210 would cost 209 steps a character (a 1 MiB payload of them: 300 ms).
 */
const MAY_OVERFLOW = /(?:^|\D)\d{210}|\d[eE]\+?0*[1-9]\d\d/;

/** Whether JSON text `text` may hold a number JSON.parse reads as an infinity: false proves none. */
export function mayHoldOverflowingNumber(text: string): boolean {
  return MAY_OVERFLOW.test(text);
}

/** Whether a parsed JSON value holds a number that is not finite, walked without recursion. */
export function holdsNonFiniteNumber(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) return true;
    } else if (Array.isArray(item)) {
      for (const child of item) stack.push(child);
    } else if (typeof item === 'object' && item !== null) {
      for (const child of Object.values(item)) stack.push(child);
    }
  }
  return false;
}

/** Whether the value of JSON text `text` holds a number beyond a double's range. */
export function jsonHoldsOverflowingNumber(text: string, value: unknown): boolean {
  return mayHoldOverflowingNumber(text) && holdsNonFiniteNumber(value);
}

/**
 * Why a message holding a number beyond a double's range is not sent in `encoding` (short: a
 * close reason): its encoder would write an infinite float, which no JSON text holds and every
 * check here refuses.
 */
export function overflowingNumberReason(encoding: string): string {
  return `holds a number beyond a double's range, which ${encoding} would carry as Infinity`;
}
