// (4b) This gateway across two nodes: the server process starts two gateways (node A and
// node B, each on its own port) sharing one broker. Subscribers connect to node B and
// `publish` goes through node A, so every message crosses the broker. Both nodes run in the
// one process, so its server CPU covers both. Fan-out only (`only: 'fanout'`). Settings as
// the single-node `gateway` contestant.
const limits = { maxConnectionsPerIp: 100_000, ratePerSecond: 1e9, rateBurst: 1e9 };

/** A contestant for the broker that `connect(tag)` returns; `tag` is unique per process. */
export function clusterContestant({ id, name, connect }) {
  return {
    id,
    name,
    only: 'fanout',
    client: {
      kind: 'jsonrpc',
      path: '/rpc',
      subscribe: { method: 'subscribe', params: ['bench'] },
    },
    async start(host) {
      const { createGateway } = await import('wsrpc-gateway');
      const { pino } = await import('pino');
      const broker = await connect(`bench${process.pid}x${Date.now().toString(36)}`);
      const node = async () => {
        const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, broker });
        gateway.method('sum', ([a, b]) => a + b);
        gateway.topic('bench');
        const { port } = await gateway.listen(0, host);
        return { gateway, port };
      };
      const a = await node();
      const b = await node();
      let failure;
      return {
        port: b.port,
        publish(data) {
          a.gateway.publish('bench', data).catch((err) => (failure ??= err));
          if (failure) throw failure;
        },
        async close() {
          await Promise.all([a, b].map((n) => n.gateway.close({ timeoutMs: 1_000 })));
          await broker.close();
        },
      };
    },
  };
}
