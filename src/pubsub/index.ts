export type { Broker, BrokerMessage, Retention, History } from './broker.js';
export { defaultRetention, TopicCreationLimitError } from './broker.js';
export type { TopicCreationBudget } from './creation-budget.js';
export { MemoryBroker } from './memory-broker.js';
export type { MemoryBrokerOptions } from './memory-broker.js';
export { defaultFlowControl, SLOW_CONSUMER_CLOSE_CODE } from './delivery.js';
export type { FlowControl, SlowConsumerPolicy } from './delivery.js';
export type { Sink } from './sink.js';
