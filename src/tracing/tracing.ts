/** Attributes of a span: what the call, the upstream or the topic was. */
export type SpanAttributes = Readonly<Record<string, string | number | boolean>>;

/** The span a traced piece of work runs in. */
export interface TraceSpan {
  /**
   * The W3C `traceparent` naming this span, to send on (an upstream's headers): its children
   * are this span's. Without a tracer it is the parent given, passed through unchanged.
   */
  readonly traceparent: string | undefined;
  /**
   * The W3C `tracestate` to send on with `traceparent`: the span's, which is its parent's
   * unless the tracer changed it. Undefined when there is none.
   */
  readonly tracestate?: string | undefined;
  /** Mark the span failed (a JSON-RPC error answered, an upstream refusing) without throwing. */
  setError(err: unknown): void;
}

/**
 * Spans around the gateway's work (`rpc.call <method>`, `upstream.request <upstream>`,
 * `pubsub.publish <topic>`). `parent` is a W3C traceparent (the client's, or the enclosing
 * span's); none, or an invalid one, starts a new trace; `parentTracestate` is the `tracestate`
 * that came with it (valid: see tracestateOf). A rejection of `run` marks the span failed and is
 * passed on unchanged; the span ends when `run` settles.
 */
export interface Tracing {
  span<T>(
    name: string,
    attributes: SpanAttributes,
    parent: string | undefined,
    run: (span: TraceSpan) => Promise<T>,
    parentTracestate?: string,
  ): Promise<T>;
}

const noop = (): void => {};
const untraced: TraceSpan = Object.freeze({ traceparent: undefined, setError: noop });

/**
 * Tracing off: `run` is called at once and its own promise returned, with the parent (and its
 * tracestate) passed through as the span's. Nothing is recorded; without a parent nothing is
 * allocated.
 */
export const noTracing: Tracing = Object.freeze({
  span<T>(
    _name: string,
    _attributes: SpanAttributes,
    parent: string | undefined,
    run: (span: TraceSpan) => Promise<T>,
    parentTracestate?: string,
  ): Promise<T> {
    if (parent === undefined) return run(untraced);
    return run({ traceparent: parent, tracestate: parentTracestate, setError: noop });
  },
});
