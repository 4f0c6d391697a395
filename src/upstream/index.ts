// Gateway mode's method routing: methods and prefixes sent to upstream services over HTTP or NATS.
export { resolveUpstreamsConfig, upstreamBounds, upstreamDefaults } from './upstreams-config.js';
export type {
  HttpUpstreamConfig,
  NatsUpstreamConfig,
  RouteConfig,
  UpstreamConfig,
  UpstreamsConfig,
} from './upstreams-config.js';
export { installUpstreamRoutes } from './install-routes.js';
export type { UpstreamRoutes } from './install-routes.js';
export { JsonRpcHttpClient } from './json-rpc-http-client.js';
export type { JsonRpcHttpClientOptions } from './json-rpc-http-client.js';
export { NatsUpstreamClient } from './nats-upstream-client.js';
export type { NatsUpstreamClientOptions } from './nats-upstream-client.js';
export { UpstreamEndpoint } from './upstream-endpoint.js';
export type {
  UpstreamCallOptions,
  UpstreamEndpointOptions,
  UpstreamObserver,
  UpstreamOutcome,
} from './upstream-endpoint.js';
export { UpstreamError } from './upstream-error.js';
export { DEFAULT_REPLY_LIMITS } from './read-reply.js';
export type { ReplyLimits } from './read-reply.js';
export type { UpstreamFailure } from './upstream-error.js';
export { IdentityHeaders, MAX_CONTEXT_HEADER_BYTES } from './identity-headers.js';
