import type { Params } from '../protocol/types.js';
import type { TraceSpan, Tracing } from '../tracing/tracing.js';
import { JsonRpcHttpClient } from '../upstream/json-rpc-http-client.js';
import type { ReplyLimits } from '../upstream/read-reply.js';
import type { UpstreamObserver } from '../upstream/upstream-endpoint.js';
import type { HttpUpstreamConfig } from '../upstream/upstreams-config.js';

/** A hook's reply larger than this is a failure (-32011): decisions are small. */
export const MAX_HOOK_REPLY_BYTES = 1024 * 1024;

/** The client of one upstream the hooks call (one pool per upstream, however many hooks use it). */
export function hookClient(
  upstream: HttpUpstreamConfig,
  observer: UpstreamObserver,
  replyLimits?: ReplyLimits,
): JsonRpcHttpClient {
  return new JsonRpcHttpClient({
    name: upstream.name,
    url: upstream.url,
    connections: upstream.connections,
    headers: upstream.headers,
    maxConcurrent: upstream.maxConcurrent,
    reservedForNewCallers: upstream.reservedForNewCallers,
    retries: upstream.retries,
    maxReplyBytes: MAX_HOOK_REPLY_BYTES,
    replyLimits,
    observer,
  });
}

/**
 * The W3C trace context headers a hook request sends: its span's `traceparent`, and the
 * `tracestate` that goes with it when there is one; none without a traceparent.
 */
export function traceHeaders(span: TraceSpan): Record<string, string> {
  if (span.traceparent === undefined) return {};
  return span.tracestate === undefined
    ? { traceparent: span.traceparent }
    : { traceparent: span.traceparent, tracestate: span.tracestate };
}

/** One hook request in an `upstream.request <name>` span, its trace context sent along. */
export function tracedHookRequest(
  tracing: Tracing,
  client: JsonRpcHttpClient,
  method: string,
  params: Params,
  options: { timeoutMs: number; headers?: Record<string, string>; notify?: boolean },
): Promise<unknown> {
  return tracing.span(
    `upstream.request ${client.name}`,
    { 'wsrpc.upstream': client.name, 'rpc.method': method },
    undefined,
    (span) => {
      const headers = { ...options.headers, ...traceHeaders(span) };
      const call = { timeoutMs: options.timeoutMs, headers };
      return options.notify
        ? client.notify(method, params, call)
        : client.call(method, params, call);
    },
  );
}
