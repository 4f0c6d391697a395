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

/** Spaces and tabs around a list-member (the spec's OWS). */
const OWS = /^[ \t]+|[ \t]+$/g;

/**
 * A `tracestate` as it goes on: its list-members, without the spaces around them and the empty
 * ones, joined by commas. Undefined when it is not one: not a string, a member that breaks the
 * grammar, a key twice, more than MAX_TRACESTATE_MEMBERS members or more than
 * MAX_TRACESTATE_CHARS characters, or none at all. The spec's rule for one it cannot parse is to
 * drop it, not the request: the trace goes on with its traceparent alone.
 */
export function tracestateOf(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const part of value.split(',')) {
    const member = part.replace(OWS, '');
    if (member === '') continue;
    if (!TRACESTATE_MEMBER.test(member)) return undefined;
    const key = member.slice(0, member.indexOf('='));
    if (keys.has(key) || members.push(member) > MAX_TRACESTATE_MEMBERS) return undefined;
    keys.add(key);
  }
  const text = members.join(',');
  return text === '' || text.length > MAX_TRACESTATE_CHARS ? undefined : text;
}
