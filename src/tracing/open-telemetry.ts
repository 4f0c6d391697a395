import type * as OpenTelemetry from '@opentelemetry/api';
import type { Context, Span, SpanContext } from '@opentelemetry/api';
import { isTraceparent } from '../protocol/traceparent.js';
import type { SpanAttributes, TraceSpan, Tracing } from './tracing.js';

/** OpenTelemetry's API module, as `import('@opentelemetry/api')` gives it. */
export type OpenTelemetryApi = typeof OpenTelemetry;

/** The span kind each of the gateway's span names stands for. */
function kindOf(api: OpenTelemetryApi, name: string): OpenTelemetry.SpanKind {
  if (name.startsWith('rpc.call')) return api.SpanKind.SERVER;
  if (name.startsWith('upstream.')) return api.SpanKind.CLIENT;
  if (name.startsWith('pubsub.publish')) return api.SpanKind.PRODUCER;
  return api.SpanKind.INTERNAL;
}

/**
 * A valid traceparent (see src/protocol/traceparent.ts) as a remote span context, with the
 * tracestate that came with it, when `api` is given one.
 */
export function spanContextOf(
  traceparent: string,
  tracestate?: string,
  api?: Pick<OpenTelemetryApi, 'createTraceState'>,
): SpanContext {
  return {
    traceId: traceparent.slice(3, 35),
    spanId: traceparent.slice(36, 52),
    traceFlags: Number.parseInt(traceparent.slice(53, 55), 16),
    isRemote: true,
    ...(tracestate !== undefined && api && { traceState: api.createTraceState(tracestate) }),
  };
}

/**
 * The tracestate a span sends on: its own, when the tracer gave it one (the parent's, or the
 * tracer's change of it), else the parent's as it came.
 */
function tracestateOfSpan(
  own: SpanContext,
  parentTracestate: string | undefined,
): string | undefined {
  if (own.traceState === undefined) return parentTracestate;
  const text = own.traceState.serialize();
  return text === '' ? undefined : text;
}

export function traceparentOf(context: SpanContext): string {
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** The span's status and exception from what failed; a JSON-RPC error's code as an attribute. */
function markFailed(api: OpenTelemetryApi, span: Span, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof Error) span.recordException(err);
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'number') span.setAttribute('rpc.jsonrpc.error_code', code);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message });
}

/**
 * Tracing through OpenTelemetry's API: spans of the tracer provider the application (or its
 * SDK) registered globally, parented on the traceparent given, active while `run` runs (so
 * spans made inside it by other instrumentation are its children when a context manager is
 * registered). The traceparent is read and written here, in W3C's format, whatever propagator
 * is registered; a span the provider does not record passes the parent on unchanged.
 */
export function openTelemetryTracing(api: OpenTelemetryApi, tracerName: string): Tracing {
  const tracer = api.trace.getTracer(tracerName);
  return {
    async span<T>(
      name: string,
      attributes: SpanAttributes,
      parent: string | undefined,
      run: (span: TraceSpan) => Promise<T>,
      parentTracestate?: string,
    ): Promise<T> {
      const traced = parent !== undefined && isTraceparent(parent);
      // A tracestate goes with the traceparent it came with, and only with it.
      const tracestate = traced ? parentTracestate : undefined;
      const parentContext: Context = traced
        ? api.trace.setSpanContext(api.ROOT_CONTEXT, spanContextOf(parent, tracestate, api))
        : api.ROOT_CONTEXT;
      const span = tracer.startSpan(name, { kind: kindOf(api, name), attributes }, parentContext);
      const own = span.spanContext();
      const valid = api.isSpanContextValid(own);
      let failed = false;
      const handle: TraceSpan = {
        traceparent: valid ? traceparentOf(own) : parent,
        tracestate: valid ? tracestateOfSpan(own, tracestate) : tracestate,
        setError(err: unknown): void {
          if (failed) return;
          failed = true;
          markFailed(api, span, err);
        },
      };
      try {
        return await api.context.with(
          api.trace.setSpan(parentContext, span),
          run,
          undefined,
          handle,
        );
      } catch (err) {
        handle.setError(err);
        throw err;
      } finally {
        span.end();
      }
    },
  };
}
