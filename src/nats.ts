// "wsrpc-gateway/nats": the NATS JetStream broker. It needs @nats-io/transport-node and
// @nats-io/jetstream, optional peer dependencies of this package
// (`npm install @nats-io/transport-node @nats-io/jetstream`); the main entry never loads them.
export { NatsBroker } from './pubsub/nats-broker.js';
export type { NatsBrokerOptions } from './pubsub/nats-broker.js';
