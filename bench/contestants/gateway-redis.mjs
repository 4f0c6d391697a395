import { clusterContestant } from './gateway-cluster.mjs';

export default clusterContestant({
  id: 'gateway-redis',
  name: 'wsrpc-gateway, 2 nodes, Redis',
  async connect(tag) {
    const { RedisBroker } = await import('wsrpc-gateway/redis');
    return RedisBroker.create({ url: 'redis://127.0.0.1:6379', prefix: `${tag}:` });
  },
});
