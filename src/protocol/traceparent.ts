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
