import { clusterContestant } from './gateway-cluster.mjs';

export default clusterContestant({
  id: 'gateway-nats',
  name: 'wsrpc-gateway, 2 nodes, NATS',
  async connect(tag) {
    const { NatsBroker } = await import('wsrpc-gateway/nats');
    return NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', prefix: tag });
  },
});
