import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
import { cutText, logNoise } from '../peer/noise-log.js';
import { keepResultText } from '../peer/result-text.js';
import type { HandlerContext } from '../peer/handler-context.js';
import type { Handler } from '../peer/method-registry.js';
import type { Params } from '../protocol/types.js';
import type { Gateway } from '../server/gateway.js';
import type { Session } from '../server/session.js';
import { noTracing } from '../tracing/tracing.js';
import type { TraceSpan, Tracing } from '../tracing/tracing.js';
import { IdentityHeaders } from './identity-headers.js';
import { JsonRpcHttpClient } from './json-rpc-http-client.js';
import { NatsUpstreamClient } from './nats-upstream-client.js';
import type { ReplyLimits } from './read-reply.js';
import type { UpstreamEndpoint } from './upstream-endpoint.js';
import { UpstreamError } from './upstream-error.js';
import { upstreamMetrics } from './upstream-metrics.js';
import type { RouteConfig, UpstreamConfig, UpstreamsConfig } from './upstreams-config.js';

/**
 * The most characters of a client's method name a log line or a span attribute carries, by
 * default: the client chooses the name, as long as its message may be.
 */
export const MAX_SHOWN_METHOD_CHARS = 256;

export interface UpstreamRouteDeps {
  logger: Logger;
  tracing: Tracing;
  /**
   * The most characters of a method name a failure's log line or a span's `rpc.method` carries
   * (default MAX_SHOWN_METHOD_CHARS); a longer one is cut there, its length logged beside it.
   */
  maxShownMethodChars?: number;
}

export interface UpstreamRoutes {
  /** The upstreams by name (hooks call theirs through these). */
  readonly upstreams: ReadonlyMap<string, UpstreamEndpoint>;
  /**
   * Resolves once every NATS upstream is connected; rejects naming @nats-io/transport-node
   * when it is not installed. HTTP upstreams connect on their first call.
   */
  readonly ready: Promise<void>;
  /** Removes the routes and closes the upstreams' connections (calls in flight are aborted). */
  close(): Promise<void>;
}

/**
 * Route the configured methods to their upstreams on `gateway`: an exact name is a method of its
 * own, a prefix route (`orders.*`) serves every name under it that has no handler of its own
 * (the longest prefix wins). Each call goes to the upstream with the session's identity headers,
 * the client's cancellation, the route's timeout and the upstream's concurrency bounds (its
 * session's, its user's and its client address's shares among them).
 */
export function installUpstreamRoutes(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any context type
  gateway: Gateway<any>,
  config: UpstreamsConfig,
  deps: UpstreamRouteDeps,
): UpstreamRoutes {
  const observer = upstreamMetrics(gateway.metrics.registry);
  const { limits } = gateway.config;
  // A reply is held to what a client's message is: it becomes the reply a client reads.
  const replyBounds: ReplyBounds = {
    maxReplyBytes: limits.maxMessageBytes,
    replyLimits: { maxDepth: limits.maxDepth, maxJsonValues: limits.maxJsonValues },
  };
  const upstreams = new Map<string, UpstreamEndpoint>();
  for (const upstream of config.upstreams.values()) {
    upstreams.set(upstream.name, endpointFor(upstream, replyBounds, observer));
  }
  const identity = new IdentityHeaders(gateway.config.auth.userOf, deps.logger);
  const exposeDetails = gateway.config.protocol.exposeErrorDetails;
  const failures = new FailureLog(deps.maxShownMethodChars ?? MAX_SHOWN_METHOD_CHARS);
  // Routed params go to the upstream as the client wrote them (request-text.ts).
  if (config.routes.length > 0) gateway.registry.keepsParamsTexts = true;
  const removers = config.routes.map((route) => {
    const handler = routeHandler(
      route,
      upstreams.get(route.upstream)!,
      identity,
      exposeDetails,
      failures,
      deps.tracing,
    );
    return route.pattern.endsWith('*')
      ? gateway.registry.prefix(route.pattern.slice(0, -1), handler)
      : gateway.method(route.pattern, handler);
  });
  const connecting = [...upstreams.values()]
    .filter((endpoint) => endpoint instanceof NatsUpstreamClient)
    .map((endpoint) => endpoint.connect());
  const ready = Promise.all(connecting).then(() => undefined);
  ready.catch((err: unknown) => deps.logger.error({ err }, 'an upstream could not connect'));
  return {
    upstreams,
    get ready() {
      return ready;
    },
    async close() {
      for (const remove of removers) remove();
      await Promise.all([...upstreams.values()].map((endpoint) => endpoint.close()));
    },
  };
}

/** What an upstream's reply may hold: its bytes, its nesting and its JSON values. */
interface ReplyBounds {
  readonly maxReplyBytes: number;
  readonly replyLimits: ReplyLimits;
}

function endpointFor(
  upstream: UpstreamConfig,
  { maxReplyBytes, replyLimits }: ReplyBounds,
  observer: ReturnType<typeof upstreamMetrics>,
): UpstreamEndpoint {
  const common = {
    name: upstream.name,
    maxConcurrent: upstream.maxConcurrent,
    maxConcurrentPerSession: upstream.maxConcurrentPerSession,
    maxConcurrentPerAddress: upstream.maxConcurrentPerAddress,
    maxConcurrentPerUser: upstream.maxConcurrentPerUser,
    reservedForNewCallers: upstream.reservedForNewCallers,
    retries: upstream.retries,
    observer,
    maxReplyBytes,
    replyLimits,
  };
  return upstream.kind === 'http'
    ? new JsonRpcHttpClient({
        ...common,
        url: upstream.url,
        connections: upstream.connections,
        headers: upstream.headers,
      })
    : new NatsUpstreamClient({ ...common, servers: upstream.servers, subject: upstream.subject });
}

/**
 * The log of routed calls that failed without the upstream's answer. A client makes such
 * failures at will (calls past its shares, calls to an upstream that is down or slow, with any
 * method name), so: a refusal (-32013) is not logged, as nothing was sent (it is counted in
 * `wsrpc_upstream_requests_total{outcome="busy"}`); the other failures are a session's noise
 * (logNoise: its first NOISE_WARN_LIMIT at warn, then debug); a method name is cut to `maxChars`.
 */
class FailureLog {
  /** Failures logged per session. */
  private readonly counts = new WeakMap<object, number>();

  constructor(readonly maxChars: number) {}

  failed(
    ctx: HandlerContext<Session<unknown>>,
    route: RouteConfig,
    requestId: string | undefined,
    err: UpstreamError,
  ): void {
    if (err.failure === 'busy') return;
    const count = (this.counts.get(ctx.session) ?? 0) + 1;
    this.counts.set(ctx.session, count);
    const fields: Record<string, unknown> = {
      upstream: err.upstream,
      route: route.pattern,
      method: this.shown(ctx.method),
      requestId,
      reason: err.reason,
      detail: err.detail,
    };
    if (ctx.method.length > this.maxChars) fields['methodChars'] = ctx.method.length;
    logNoise(ctx.logger, count, fields, 'upstream request failed');
  }

  /** `method` whole up to `maxChars`, else cut there (never inside a surrogate pair). */
  shown(method: string): string {
    return cutText(method, this.maxChars);
  }
}

function routeHandler(
  route: RouteConfig,
  endpoint: UpstreamEndpoint,
  identity: IdentityHeaders,
  exposeDetails: boolean,
  failures: FailureLog,
  tracing: Tracing,
): Handler<Session<unknown>> {
  const { timeoutMs, idempotent } = route;
  /**
   * The call itself; `traceparent` is the one the upstream gets, with `tracestate` (what came
   * with it), `span` the client span's.
   */
  const forward = async (
    params: unknown,
    ctx: HandlerContext<Session<unknown>>,
    traceparent: string | undefined,
    tracestate: string | undefined,
    span: TraceSpan | undefined,
  ): Promise<unknown> => {
    // Set here rather than left to the endpoint: the failure log below names it.
    const requestId = nanoid();
    try {
      // The one headers object of the call: the endpoint and the transport add to it, none copy
      // it. In the try: a session whose user cannot go out as a header is refused (-32011).
      const headers = identity.of(ctx.session, endpoint.name);
      headers['x-request-id'] = requestId;
      if (traceparent !== undefined) {
        headers['traceparent'] = traceparent;
        if (tracestate !== undefined) headers['tracestate'] = tracestate;
      }
      // The upstream's result as it wrote it, when it may hold a number JavaScript does not
      // hold exactly: the client is sent that text (keepResultText), not a rewrite of it.
      let resultText: string | undefined;
      const options = {
        signal: ctx.signal,
        timeoutMs,
        headers,
        idempotent,
        session: ctx.session,
        address: ctx.session.remoteAddress,
        user: ctx.session.user,
        onResultText: (text: string) => (resultText = text),
      };
      if (ctx.id === undefined) {
        await endpoint.notify(ctx.method, params as Params | undefined, options);
        return undefined;
      }
      const result = await endpoint.call(ctx.method, params as Params | undefined, options);
      if (resultText !== undefined) keepResultText(ctx, result, resultText);
      return result;
    } catch (err) {
      span?.setError(err);
      if (!(err instanceof UpstreamError)) throw err;
      failures.failed(ctx, route, requestId, err);
      // A notification's failure has no one to answer: logged (or, busy, not) and counted above,
      // it is not thrown on to be logged again, once per failure, as a failed handler.
      if (ctx.id === undefined) return undefined;
      throw exposeDetails ? err.withDetail() : err;
    }
  };
  // Tracing off: no spans to open, and the client's trace context, if any, goes on as it came
  // (what noTracing's spans would pass through), without the spans' closures per call.
  if (tracing === noTracing) {
    return (params, ctx) => forward(params, ctx, ctx.traceparent, ctx.tracestate, undefined);
  }
  // Named after the route, not the client's method name: a prefix route serves any number of
  // names, and span names should be few (OpenTelemetry's RPC conventions). The name itself is
  // `rpc.method`, cut as in the log.
  const callName = `rpc.call ${route.pattern}`;
  const requestName = `upstream.request ${route.upstream}`;
  return (params: unknown, ctx: HandlerContext<Session<unknown>>) => {
    const attributes = {
      'rpc.method': failures.shown(ctx.method),
      'wsrpc.upstream': route.upstream,
    };
    // The call as the gateway serves it (server span), and inside it the request to the upstream
    // (client span), whose traceparent the upstream gets.
    return tracing.span(
      callName,
      attributes,
      ctx.traceparent,
      (call) =>
        tracing.span(
          requestName,
          attributes,
          call.traceparent,
          (span) => forward(params, ctx, span.traceparent, span.tracestate, span),
          call.tracestate,
        ),
      ctx.tracestate,
    );
  };
}
