// The compression scenario (bench/deflate-scenario.mjs): this gateway as in gateway.mjs, with
// `perMessageDeflate: true` (each broadcast compressed once for every subscriber that
// negotiated it) or, for the baseline, without it. Its subscribers offer permessage-deflate.
const limits = { maxConnectionsPerIp: 100_000, ratePerSecond: 1e9, rateBurst: 1e9 };

export function deflateGateway({ id, name, perMessageDeflate }) {
  return {
    id,
    name,
    only: 'deflate',
    client: {
      kind: 'jsonrpc',
      path: '/rpc',
      subscribe: { method: 'subscribe', params: ['bench'] },
      deflate: true,
    },
    async start(host) {
      const { createGateway } = await import('wsrpc-gateway');
      const { pino } = await import('pino');
      const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, perMessageDeflate });
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

export default deflateGateway({
  id: 'gateway-deflate',
  name: 'gateway, deflate once per broadcast',
  perMessageDeflate: true,
});
