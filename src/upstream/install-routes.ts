import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
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
import type { UpstreamEndpoint } from './upstream-endpoint.js';
import { UpstreamError } from './upstream-error.js';
import { upstreamMetrics } from './upstream-metrics.js';
import type { RouteConfig, UpstreamConfig, UpstreamsConfig } from './upstreams-config.js';

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
  deps: { logger: Logger; tracing: Tracing },
): UpstreamRoutes {
  const observer = upstreamMetrics(gateway.metrics.registry);
  const maxReplyBytes = gateway.config.limits.maxMessageBytes;
  const upstreams = new Map<string, UpstreamEndpoint>();
  for (const upstream of config.upstreams.values()) {
    upstreams.set(upstream.name, endpointFor(upstream, maxReplyBytes, observer));
  }
  const identity = new IdentityHeaders(gateway.config.auth.userOf, deps.logger);
  const exposeDetails = gateway.config.protocol.exposeErrorDetails;
  const removers = config.routes.map((route) => {
    const handler = routeHandler(
      route,
      upstreams.get(route.upstream)!,
      identity,
      exposeDetails,
      deps,
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

function endpointFor(
  upstream: UpstreamConfig,
  maxReplyBytes: number,
  observer: ReturnType<typeof upstreamMetrics>,
): UpstreamEndpoint {
  const common = {
    name: upstream.name,
    maxConcurrent: upstream.maxConcurrent,
    maxConcurrentPerSession: upstream.maxConcurrentPerSession,
    maxConcurrentPerAddress: upstream.maxConcurrentPerAddress,
    maxConcurrentPerUser: upstream.maxConcurrentPerUser,
    retries: upstream.retries,
    observer,
    maxReplyBytes,
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

function routeHandler(
  route: RouteConfig,
  endpoint: UpstreamEndpoint,
  identity: IdentityHeaders,
  exposeDetails: boolean,
  deps: { logger: Logger; tracing: Tracing },
): Handler<Session<unknown>> {
  const { timeoutMs, idempotent } = route;
  /** The call itself; `traceparent` is the one the upstream gets, `span` the client span's. */
  const forward = async (
    params: unknown,
    ctx: HandlerContext<Session<unknown>>,
    traceparent: string | undefined,
    span: TraceSpan | undefined,
  ): Promise<unknown> => {
    // The one headers object of the call: the endpoint and the transport add to it, none copy it.
    const headers = identity.of(ctx.session);
    // Set here rather than left to the endpoint: the failure log below names it.
    headers['x-request-id'] = nanoid();
    if (traceparent !== undefined) headers['traceparent'] = traceparent;
    const options = {
      signal: ctx.signal,
      timeoutMs,
      headers,
      idempotent,
      session: ctx.session,
      address: ctx.session.remoteAddress,
      user: ctx.session.user,
    };
    try {
      if (ctx.id === undefined) {
        await endpoint.notify(ctx.method, params as Params | undefined, options);
        return undefined;
      }
      return await endpoint.call(ctx.method, params as Params | undefined, options);
    } catch (err) {
      span?.setError(err);
      if (!(err instanceof UpstreamError)) throw err;
      ctx.logger.warn(
        {
          upstream: err.upstream,
          method: ctx.method,
          requestId: headers['x-request-id'],
          reason: err.reason,
          detail: err.detail,
        },
        'upstream request failed',
      );
      throw exposeDetails ? err.withDetail() : err;
    }
  };
  // Tracing off: no spans to open, and the client's traceparent, if any, goes on as it came
  // (what noTracing's spans would pass through), without the spans' closures per call.
  if (deps.tracing === noTracing) {
    return (params, ctx) => forward(params, ctx, ctx.traceparent, undefined);
  }
  const spanName = `upstream.request ${route.upstream}`;
  return (params: unknown, ctx: HandlerContext<Session<unknown>>) => {
    const attributes = { 'rpc.method': ctx.method, 'wsrpc.upstream': route.upstream };
    // The call as the gateway serves it (server span), and inside it the request to the upstream
    // (client span), whose traceparent the upstream gets.
    return deps.tracing.span(`rpc.call ${ctx.method}`, attributes, ctx.traceparent, (call) =>
      deps.tracing.span(spanName, attributes, call.traceparent, (span) =>
        forward(params, ctx, span.traceparent, span),
      ),
    );
  };
}
