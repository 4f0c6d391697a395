// (4) This gateway, imported as the built package (dist/src/index.js through the package's
// own "exports"), with its defaults: createGateway, gateway.method, gateway.topic,
// gateway.publish. Changed from the defaults, and only these:
// - the logger is quieted to "warn" (it logs one line per connect and disconnect at "info",
//   which would write 2,000 lines in the memory scenario);
// - the abuse limits are raised out of the way of one load generator on one IP, which opens
//   2,000 connections and sends far more than 1,000 calls/s on one: the per-IP connection
//   cap and the per-connection rate limit (its token bucket still runs on every call).
const limits = { maxConnectionsPerIp: 100_000, ratePerSecond: 1e9, rateBurst: 1e9 };

/**
 * This gateway as described above, with `options` added to its createGateway options and
 * `client` to its load-generator clients' settings (e.g. an encoding, deflate); `only` limits
 * it to one kind of scenario (see takesPart in scenarios.mjs).
 */
export function gatewayContestant({ id, name, only, client = {}, options = {} }) {
  return {
    id,
    name,
    ...(only && { only }),
    client: {
      kind: 'jsonrpc',
      path: '/rpc',
      subscribe: { method: 'subscribe', params: ['bench'] },
      ...client,
    },
    async start(host) {
      const { createGateway } = await import('wsrpc-gateway');
      const { pino } = await import('pino');
      const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, ...options });
      gateway.method('sum', ([a, b]) => a + b);
      gateway.topic('bench');
      const { port } = await gateway.listen(0, host);
      let failure;
      return {
        port,
        publish(data) {
          gateway.publish('bench', data).catch((err) => (failure ??= err));
          if (failure) throw failure;
        },
        close: () => gateway.close({ timeoutMs: 1_000 }),
      };
    },
  };
}

export default gatewayContestant({ id: 'gateway', name: 'wsrpc-gateway (this)' });
