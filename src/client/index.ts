// Browser-safe entry: nothing here may import Node built-ins or `ws`.
export { RpcClient, createClient } from './client.js';
export type { ClientConfig, ClientOptions } from './client.js';
export type { GetToken, PerDial, ReconnectOptions, TokenRequest } from './client-options.js';
export { AuthenticationError } from './authentication.js';
export type { AuthenticateResult, DisconnectEvent } from './authentication.js';
export type { ConnectionState } from './connection-state.js';
export type { BackoffOptions } from './backoff.js';
export { method, notification, subscription } from '../peer/method-descriptor.js';
export type {
  SubscriptionEvent,
  ClientSubscriptionMethods,
  JoinedSubscription,
} from './subscriptions.js';
export { subscriptionStatus$ } from './subscription-status.js';
export type { SubscriptionStatus, SubscriptionStatusState } from './subscription-status.js';
export { iterate, BufferOverflowError, DEFAULT_ITERATE_BUFFER } from './async-iterate.js';
export type { IterateOptions, SubscriptionIterator } from './async-iterate.js';
export type { InboxGap } from './inbox.js';
export type { HistoryOptions, HistoryResult } from './history.js';
export type { PresenceMember, PresenceState } from './presence.js';
export type {
  MethodDescriptor,
  NotificationDescriptor,
  SubscriptionDescriptor,
  ParamsOf,
  ResultOf,
} from '../peer/method-descriptor.js';
export type { CallState, HandlerContext } from '../peer/handler-context.js';
export type { Middleware, MiddlewareContext, MiddlewareKind } from '../peer/middleware.js';
export type { CallOptions } from '../peer/pending-calls.js';
export type { BatchEntry, IncomingNotification } from '../peer/peer.js';
export { silentLogger } from '../peer/logger.js';
export type { Logger, LogFn } from '../peer/logger.js';
export type { Handler, HandlerTable } from '../peer/method-registry.js';
export type { WebSocketConstructor, WebSocketLike } from '../transport/websocket-transport.js';
export { CloseCode } from '../transport/transport.js';
export { fallbackSocket, sseSocket } from './sse-transport.js';
export type { FallbackSocketOptions, SseSocketOptions, TransportName } from './sse-transport.js';
export * from '../protocol/index.js';
export { defineContract } from '../contract/contract.js';
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
} from '../contract/contract.js';
export type { JsonOnlyContract, JsonProblem } from '../contract/json-only.js';
export type { TopicName, TopicNames, SpecOfTopic, StreamKeys } from '../contract/topic-names.js';
export type { MethodsApi, MethodFunctions } from '../contract/bind.js';
export type { Nested, NestedHandlers } from '../contract/nested.js';
export { mergeContracts } from '../contract/compose.js';
export type { ContractInfo, MergedContract, DistinctNames } from '../contract/compose.js';
export { useContract } from './contract-client.js';
export type {
  ContractClient,
  ClientImplementation,
  ClientMethodHandlers,
  UseContractOptions,
} from './contract-client.js';
export type { ValidationIssues } from '../contract/validate.js';
