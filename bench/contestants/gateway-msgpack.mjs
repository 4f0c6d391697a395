// This gateway as in gateway.mjs, with MessagePack on (`encodings: ['json', 'msgpack']`) and
// its load-generator clients choosing it (subprotocol jsonrpc-2.0+msgpack): requests, replies
// and fan-out frames are MessagePack, everything else as for `gateway`.
const limits = { maxConnectionsPerIp: 100_000, ratePerSecond: 1e9, rateBurst: 1e9 };
export default {
  id: 'gateway-msgpack',
  name: 'wsrpc-gateway, MessagePack',
  client: {
    kind: 'jsonrpc',
    path: '/rpc',
    subscribe: { method: 'subscribe', params: ['bench'] },
    encoding: 'msgpack',
  },
  async start(host) {
    const { createGateway } = await import('wsrpc-gateway');
    const { pino } = await import('pino');
    const gateway = createGateway({
      logger: pino({ level: 'warn' }),
      limits,
      encodings: ['json', 'msgpack'],
    });
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
