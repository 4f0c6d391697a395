// (4b) This gateway across two nodes, each a process of its own with its own broker
// connections: node A runs in the contestant's server process (bench/server.mjs) and node B
// in a child process it forks (bench/cluster-node.mjs). Both connect to the broker with the
// same prefix, as two machines of one deployment would. Subscribers connect to node B and
// `publish` goes through node A, so every message crosses the broker: node A publishes it,
// the broker hands it to node B, node B fans it out. The server CPU reported for the slice
// is node A's plus node B's (`helperCpuUs`); the broker's own (Redis, NATS) is not counted.
// Fan-out only (`only: 'fanout'`). Settings as the single-node `gateway` contestant.
import { fileURLToPath } from 'node:url';
import { benchLimits } from '../gateway-limits.mjs';

export const limits = benchLimits;

/** One gateway node on `broker`, listening on a free port of `host`. */
export async function startNode(host, broker) {
  const { createGateway } = await import('wsrpc-gateway');
  const { pino } = await import('pino');
  const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, broker });
  gateway.method('sum', ([a, b]) => a + b);
  gateway.topic('bench');
  const { port } = await gateway.listen(0, host);
  return { gateway, port };
}

/**
 * A contestant for the broker that `connect(tag)` returns (a new broker instance with its own
 * connections on every call); `tag` is the prefix both nodes share, unique per server process.
 */
export function clusterContestant({ id, name, connect }) {
  return {
    id,
    name,
    only: 'fanout',
    connect,
    client: {
      kind: 'jsonrpc',
      path: '/rpc',
      subscribe: { method: 'subscribe', params: ['bench'] },
    },
    async start(host) {
      const { Child } = await import('../ipc.mjs');
      const tag = `bench${process.pid}x${Date.now().toString(36)}`;
      const nodeB = new Child(
        `${name} node B`,
        fileURLToPath(new URL('../cluster-node.mjs', import.meta.url)),
      );
      let broker, a;
      try {
        const [started] = await Promise.all([
          nodeB.request('start', { id, host, tag }, 30_000),
          (async () => {
            broker = await connect(tag);
            a = await startNode(host, broker);
          })(),
        ]);
        let failure;
        return {
          port: started.port,
          publish(data) {
            a.gateway.publish('bench', data).catch((err) => (failure ??= err));
            if (failure) throw failure;
          },
          /** Node B's CPU time so far (µs), added to this process's by bench/server.mjs. */
          helperCpuUs: async () => (await nodeB.request('cpu')).us,
          async close() {
            await Promise.all([
              a.gateway.close({ timeoutMs: 1_000 }).then(() => broker.close()),
              nodeB.stop(1_500),
            ]);
          },
        };
      } catch (err) {
        await nodeB.stop(1_000);
        await a?.gateway.close({ timeoutMs: 500 }).catch(() => undefined);
        await broker?.close().catch(() => undefined);
        throw err;
      }
    },
  };
}
