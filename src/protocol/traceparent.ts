/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header): the one shape of
 * `traceparent` taken from a client, `00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>`,
 * lower case, with neither id all zeros. Anything else is ignored as if absent (the spec's rule
 * for an invalid header: start a new trace), so what reaches a handler or an upstream's headers
 * is always 55 safe characters.
 */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

export function isTraceparent(value: unknown): value is string {
  return typeof value === 'string' && value.length === 55 && TRACEPARENT.test(value);
}

/** W3C Trace Context's bounds on `tracestate`: its list-members, and its length without spaces. */
export const MAX_TRACESTATE_MEMBERS = 32;
export const MAX_TRACESTATE_CHARS = 512;

/**
 * One list-member of `tracestate` (https://www.w3.org/TR/trace-context/#tracestate-header):
 * `key=value`, the key a simple one (a lower-case letter, then up to 255 of a-z 0-9 _ - * /) or a
 * multi-tenant one (`tenant@system`), the value up to 256 printable ASCII characters but `,` and
 * `=`, not ending with a space.
 */
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * A `tracestate` as it goes on: its list-members, without the spaces around them and the empty
 * ones, joined by commas. Undefined when it is not one: not a string, more than
 * MAX_TRACESTATE_MEMBERS list-members (the empty ones counted, as the spec's grammar counts
 * them), a member that breaks the grammar, a key twice, more than MAX_TRACESTATE_CHARS
 * characters, or no member at all. The spec's rule for one it cannot parse is to drop it, not the
 * request: the trace goes on with its traceparent alone. It takes time in proportion to the
 * value's length, at most: a request's member can be as long as its message.
 */
export function tracestateOf(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  // One list-member past the bound tells that there are too many, however many follow it.
  const parts = value.split(',', MAX_TRACESTATE_MEMBERS + 1);
  if (parts.length > MAX_TRACESTATE_MEMBERS) return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const part of parts) {
    const member = withoutOws(part);
    if (member === '') continue;
    if (!TRACESTATE_MEMBER.test(member)) return undefined;
    const key = member.slice(0, member.indexOf('='));
    if (keys.has(key)) return undefined;
    keys.add(key);
    members.push(member);
  }
  const text = members.join(',');
  return text === '' || text.length > MAX_TRACESTATE_CHARS ? undefined : text;
}

/**
 * `part` without the spaces and tabs around it (the spec's OWS), each character looked at once:
 * a regular expression for the trailing ones tries again from every space of a run that does not
 * end the part, in time growing with the square of the run.
 */
function withoutOws(part: string): string {
  let start = 0;
  let end = part.length;
  while (start < end && isOws(part.charCodeAt(start))) start++;
  while (end > start && isOws(part.charCodeAt(end - 1))) end--;
  return part.slice(start, end);
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}
