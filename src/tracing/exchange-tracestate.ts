/*
 * The `tracestate` header of a POST /rpc, for the upstream requests of its calls. A request
 * object's `tracestate` member is not read: the parse of a request keeps its traceparent only.
 */

/** A POST's trace context headers, by the session of its exchange (one session per POST). */
const byExchange = new WeakMap<object, { traceparent: string; tracestate: string }>();

/**
 * Keep the valid `tracestate` header of the POST whose exchange is `session`, with the valid
 * `traceparent` header it came with: it belongs to the requests of the body that take that one.
 */
export function keepExchangeTracestate(
  session: object,
  traceparent: string,
  tracestate: string,
): void {
  byExchange.set(session, { traceparent, tracestate });
}

/**
 * The tracestate of a call: its POST's header, when the call's traceparent is that POST's
 * header's (a request with a traceparent member of its own has no tracestate of the header's).
 */
export function tracestateOfCall(call: {
  readonly session: object;
  readonly traceparent: string | undefined;
}): string | undefined {
  if (call.traceparent === undefined) return undefined;
  const kept = byExchange.get(call.session);
  return kept?.traceparent === call.traceparent ? kept.tracestate : undefined;
}
