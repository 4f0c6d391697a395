// (P) This gateway with one topic, "room", declared with `presence: true` (or, for the
// baseline rows, the same topic without it), on the MemoryBroker or on Redis (one node, its own
// key prefix). The presence scenario's clients subscribe to "room" and unsubscribe; the server
// process also watches `gateway.presence('room').events$`, as an application showing the room
// would, and reads what bench/presence-probe.mjs counts. Settings as the `gateway` contestant,
// and maxConnections raised above the scenario's 10,000 members. Presence scenario only
// (`only: 'presence'`).
import { countRedisCommands, presenceProbe } from '../presence-probe.mjs';
import { benchLimits } from '../gateway-limits.mjs';

const limits = { ...benchLimits, maxConnections: 100_000 };
export const PRESENCE_TOPIC = 'room';
const REDIS_URL = 'redis://127.0.0.1:6379';

export function presenceContestant({ id, name, presence, redis }) {
  return {
    id,
    name,
    only: 'presence',
    presence,
    broker: redis ? 'redis' : 'memory',
    client: { kind: 'jsonrpc', path: '/rpc', subscribe: { method: 'subscribe', params: ['room'] } },
    async start(host) {
      const { createGateway, MemoryBroker } = await import('wsrpc-gateway');
      const { pino } = await import('pino');
      let broker;
      if (redis) {
        await countRedisCommands(REDIS_URL);
        const { RedisBroker } = await import('wsrpc-gateway/redis');
        const prefix = `bench${process.pid}x${Date.now().toString(36)}:`;
        broker = await RedisBroker.create({ url: REDIS_URL, prefix });
      } else broker = new MemoryBroker();
      const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, broker });
      gateway.method('sum', ([a, b]) => a + b);
      gateway.topic(PRESENCE_TOPIC, presence ? { presence: true } : undefined);
      const probe = presenceProbe({ gateway, broker, topic: PRESENCE_TOPIC, presence });
      const { port } = await gateway.listen(0, host);
      return {
        port,
        probe,
        publish() {
          throw new Error(`${name}: the presence scenario publishes nothing`);
        },
        async close() {
          await gateway.close({ timeoutMs: 1_000 });
          await broker.close();
        },
      };
    },
  };
}

export default presenceContestant({
  id: 'gateway-presence',
  name: 'gateway + presence, memory',
  presence: true,
});
