export { noTracing } from './tracing.js';
export type { SpanAttributes, TraceSpan, Tracing } from './tracing.js';
export { loadTracing } from './load-tracing.js';
export { resolveTracingConfig, tracingDefaults } from './tracing-config.js';
export type { TracingConfig } from './tracing-config.js';
export { isTraceparent } from '../protocol/traceparent.js';
