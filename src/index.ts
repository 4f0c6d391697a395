// Server-side public surface. The browser-safe client lives at "<package>/client", the Redis and
// NATS brokers at "<package>/redis" and "<package>/nats" (their clients are optional peers).
export { Gateway, createGateway } from './server/gateway.js';
export type { CloseOptions, DrainOptions } from './server/gateway.js';
export type { RevokeSessionOptions, RevokeUserOptions } from './server/revocation.js';
export { Session } from './server/session.js';
export type { JoinOptions } from './server/membership.js';
export type {
  GatewayOptions,
  GatewayDataOptions,
  GatewayCodeOptions,
  GatewayLimits,
  GatewayRoutes,
  IdentityOptions,
  TlsOptions,
  UpgradeRequest,
  UserInboxOptions,
} from './server/options.js';
export { IdentityCloseCode } from './server/identity.js';
export type { AuthenticateResult, UnauthenticatedReason } from './server/identity.js';
export { tlsFromEnv } from './server/tls-from-env.js';
export { defaultLimits } from './server/options.js';
export type { LifecycleEvent, UserPresenceChange } from './server/lifecycle-events.js';
export type { ClusterEventsOptions } from './server/lifecycle-options.js';
export type { PerMessageDeflateOptions } from './server/deflate-options.js';
export type { DeflateSettings } from './transport/deflate-frames.js';
export { gatewayDefaults, resolveGatewayOptions } from './server/gateway-config.js';
export type { GatewayConfig } from './server/gateway-config.js';
export { TrustedProxies } from './server/client-address.js';
export type { Readiness } from './server/http-routes.js';
export { UpgradeRejection } from './server/upgrade-rejection.js';
export { createLogger, REDACTED_PATHS, scrubLogged } from './server/logger.js';
export { brokerFromEnv } from './server/broker-from-env.js';
export { GatewayMetrics } from './server/metrics.js';
export type { PresenceHandle } from './server/presence-service.js';
export type { PresenceEvent } from './server/presence-window.js';
export type { TopicPresenceOptions } from './server/presence-options.js';
export type { PresenceState } from './client/presence.js';
export { TokenBucket } from './server/token-bucket.js';
export { PubSubService, defaultSubscriptionMethods } from './server/pubsub-service.js';
export type {
  SubscriptionMethods,
  TopicOptions,
  PublishFromOptions,
  StreamHandler,
  PubSubStats,
} from './server/pubsub-service.js';
export * from './pubsub/index.js';
export type { PublishOptions } from './server/pubsub-types.js';
export type { HistoryPage } from './server/pubsub-history.js';
export { defineContract } from './contract/contract.js';
export type {
  Contract,
  MethodSpec,
  NotificationSpec,
  SubscriptionSpec,
  Schema,
  CallParams,
  CallResult,
  HandlerParams,
  HandlerResult,
  SubscriptionData,
  SubscriptionParams,
  PublishData,
  CheckedContract,
} from './contract/contract.js';
export type { JsonOnlyContract, JsonProblem } from './contract/json-only.js';
export type { TopicName, TopicNames, SpecOfTopic, StreamKeys } from './contract/topic-names.js';
export { toOpenRpc } from './contract/openrpc.js';
export type { OpenRpcDocument } from './contract/openrpc.js';
export { validateParams, validateResult, normalizeParams } from './contract/validate.js';
export type { ValidationIssues } from './contract/validate.js';
export { bindMethods } from './contract/bind.js';
export type { MethodsApi, MethodFunctions, Caller } from './contract/bind.js';
export type { Nested, NestedHandlers } from './contract/nested.js';
export { mergeContracts } from './contract/compose.js';
export type { ContractInfo, MergedContract, DistinctNames } from './contract/compose.js';
export { implementContract, clientApi, contractEvents } from './server/contract-server.js';
export type {
  ContractImplementation,
  MethodHandlers,
  ImplementOptions,
  ContractEvents,
  Notifiable,
  StreamSource,
} from './server/contract-server.js';
export { useContract } from './client/contract-client.js';
export type {
  ContractClient,
  ClientImplementation,
  ClientMethodHandlers,
  UseContractOptions,
} from './client/contract-client.js';
export * from './peer/index.js';
export type { Middleware, MiddlewareContext, MiddlewareKind } from './peer/middleware.js';
export type { CallState } from './peer/handler-context.js';
export { createInMemoryPair, InMemoryTransport } from './transport/in-memory-transport.js';
export { WsTransport } from './transport/ws-transport.js';
export { NdjsonTransport } from './transport/ndjson-transport.js';
export { streamSocket, tcpSocket } from './transport/ndjson-socket.js';
export { fallbackSocket, sseSocket } from './client/sse-transport.js';
export type {
  FallbackSocketOptions,
  SseSocketOptions,
  TransportName,
} from './client/sse-transport.js';
export type { TcpSocketOptions } from './transport/ndjson-socket.js';
export { WebSocketTransport } from './transport/websocket-transport.js';
export type {
  WebSocketConstructor,
  WebSocketLike,
  WebSocketTransportOptions,
} from './transport/websocket-transport.js';
export { CloseCode } from './transport/transport.js';
export type {
  ServerTransport,
  Transport,
  TransportKind,
  TransportListener,
} from './transport/transport.js';
export { RpcClient, createClient } from './client/client.js';
export type { ClientConfig, ClientOptions } from './client/client.js';
export type { GetToken, PerDial, ReconnectOptions, TokenRequest } from './client/client-options.js';
export type { BackoffOptions } from './client/backoff.js';
export { AuthenticationError } from './client/authentication.js';
export type { DisconnectEvent } from './client/authentication.js';
export type { ConnectionState } from './client/connection-state.js';
export type {
  SubscriptionEvent,
  ClientSubscriptionMethods,
  JoinedSubscription,
} from './client/subscriptions.js';
export { subscriptionStatus$ } from './client/subscription-status.js';
export type { SubscriptionStatus, SubscriptionStatusState } from './client/subscription-status.js';
export { iterate, BufferOverflowError, DEFAULT_ITERATE_BUFFER } from './client/async-iterate.js';
export type { IterateOptions, SubscriptionIterator } from './client/async-iterate.js';
export type { HistoryOptions, HistoryResult } from './client/history.js';
export type { PresenceMember } from './client/presence.js';
export type { InboxGap } from './client/inbox.js';
export * from './protocol/index.js';
