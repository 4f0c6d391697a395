export type { Broker, BrokerMessage, Retention, History } from './broker.js';
export {
  defaultRetention,
  TopicCreationLimitError,
  PublishUnconfirmedError,
  MAX_EXCEPT,
} from './broker.js';
export { MAX_HISTORY_PAGE } from './history-params.js';
export { DenyListFullError, DEFAULT_DENY_FOR_MS, MAX_DENY_FOR_MS } from './deny-list.js';
export type { Denial } from './deny-list.js';
export { SessionDenyListFullError, DEFAULT_SESSION_DENY_FOR_MS } from './session-deny-list.js';
export type { SessionDenial } from './session-deny-list.js';
export {
  MemoryPresenceStore,
  DEFAULT_PRESENCE_LEASE_MS,
  DEFAULT_PRESENCE_COALESCE_MS,
  DEFAULT_PRESENCE_MAX_LISTED,
  MAX_PRESENCE_INFO_BYTES,
  MAX_PRESENCE_PAGE,
} from './presence.js';
export type {
  PresenceMember,
  PresenceEntry,
  PresencePage,
  PresenceStore,
  ReapedMembers,
} from './presence.js';
export type { TopicCreationBudget } from './creation-budget.js';
export { MemoryBroker } from './memory-broker.js';
export type { MemoryBrokerOptions } from './memory-broker.js';
export { defaultFlowControl, SLOW_CONSUMER_CLOSE_CODE } from './delivery.js';
export type { FlowControl, SlowConsumerPolicy } from './delivery.js';
export type { Sink } from './sink.js';
