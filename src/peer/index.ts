export { Peer } from './peer.js';
export { PeerCore } from './peer-core.js';
export type { PeerOptions, IncomingNotification, BatchEntry, CloseInfo } from './peer.js';
export { HandlerTable, MethodRegistry } from './method-registry.js';
export type { Handler } from './method-registry.js';
export { method, notification, subscription } from './method-descriptor.js';
export type {
  MethodDescriptor,
  NotificationDescriptor,
  SubscriptionDescriptor,
  ParamsOf,
  ResultOf,
} from './method-descriptor.js';
export type { HandlerContext } from './handler-context.js';
export type { CallOptions, WithdrawnCall } from './pending-calls.js';
export { silentLogger } from './logger.js';
export type { Logger, LogFn } from './logger.js';
