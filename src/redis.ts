// "wsrpc-gateway/redis": the Redis broker. It needs ioredis, an optional peer dependency of this
// package (`npm install ioredis`); the main entry never loads it.
export { RedisBroker } from './pubsub/redis-broker.js';
export type { RedisBrokerOptions } from './pubsub/redis-broker.js';
