// A minimal OpenTelemetry SDK for the tests (no SDK package is installed): a tracer provider
// that records every span with its parent, and an AsyncLocalStorage context manager, both
// written against @opentelemetry/api only.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { ROOT_CONTEXT, TraceFlags, context, trace } from '@opentelemetry/api';
import type {
  Context,
  ContextManager,
  Exception,
  Span,
  SpanAttributeValue,
  SpanAttributes,
  SpanContext,
  SpanKind,
  SpanOptions,
  SpanStatus,
  Tracer,
  TracerProvider,
} from '@opentelemetry/api';

export interface RecordedSpan {
  name: string;
  tracer: string;
  kind: SpanKind | undefined;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: SpanAttributes;
  status: SpanStatus | undefined;
  exceptions: Exception[];
  ended: boolean;
}

class RecordingSpan implements Span {
  constructor(
    private readonly own: SpanContext,
    readonly record: RecordedSpan,
  ) {}
  spanContext(): SpanContext {
    return this.own;
  }
  setAttribute(key: string, value: SpanAttributeValue): this {
    this.record.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: SpanAttributes): this {
    Object.assign(this.record.attributes, attributes);
    return this;
  }
  addEvent(): this {
    return this;
  }
  addLink(): this {
    return this;
  }
  addLinks(): this {
    return this;
  }
  setStatus(status: SpanStatus): this {
    this.record.status = status;
    return this;
  }
  updateName(name: string): this {
    this.record.name = name;
    return this;
  }
  end(): void {
    this.record.ended = true;
  }
  isRecording(): boolean {
    return !this.record.ended;
  }
  recordException(exception: Exception): void {
    this.record.exceptions.push(exception);
  }
}

class RecordingTracer implements Tracer {
  constructor(
    private readonly name: string,
    private readonly spans: RecordedSpan[],
  ) {}

  startSpan(name: string, options: SpanOptions = {}, parent: Context = context.active()): Span {
    const parentContext = trace.getSpanContext(parent);
    const traceId = parentContext?.traceId ?? randomBytes(16).toString('hex');
    const spanId = randomBytes(8).toString('hex');
    const record: RecordedSpan = {
      name,
      tracer: this.name,
      kind: options.kind,
      traceId,
      spanId,
      parentSpanId: parentContext?.spanId,
      attributes: { ...options.attributes },
      status: undefined,
      exceptions: [],
      ended: false,
    };
    this.spans.push(record);
    // A child's trace state is its parent's, as OpenTelemetry's SDK makes it.
    const own: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED };
    if (parentContext?.traceState) own.traceState = parentContext.traceState;
    return new RecordingSpan(own, record);
  }

  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    ...rest: unknown[]
  ): ReturnType<F> {
    const fn = rest.pop() as F;
    const [options, parent] = rest as [SpanOptions | undefined, Context | undefined];
    const span = this.startSpan(name, options, parent);
    const run = fn as (span: Span) => ReturnType<F>;
    return context.with(trace.setSpan(parent ?? context.active(), span), run, undefined, span);
  }
}

class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

/** Register the recording provider and context manager globally; `uninstall` to take them off. */
export function installRecordingTracer(): { spans: RecordedSpan[]; uninstall(): void } {
  const spans: RecordedSpan[] = [];
  const provider: TracerProvider = {
    getTracer: (name: string) => new RecordingTracer(name, spans),
  };
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncContextManager());
  return {
    spans,
    uninstall() {
      trace.disable();
      context.disable();
    },
  };
}
