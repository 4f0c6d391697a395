// The tracing surface this module needs, as src/tracing defines it (gw-spec): upstream requests
// run inside `span`, and the span's traceparent goes to the upstream.

export interface SpanHandle {
  readonly traceparent: string | undefined;
  setError(err: unknown): void;
}

export interface Tracing {
  span<T>(
    name: string,
    attributes: Record<string, string | number | boolean>,
    parent: string | undefined,
    run: (span: SpanHandle) => Promise<T>,
  ): Promise<T>;
}

/** No tracing: runs `run` with the parent's traceparent passed through. */
export const noUpstreamTracing: Tracing = {
  span: (_name, _attributes, parent, run) =>
    run({ traceparent: parent, setError: () => undefined }),
};
