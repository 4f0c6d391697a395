// The two servers of the scale run, each with the same two topic families: "all" (every
// connection subscribes) and "t.<n>" (the many-topics scenario).
//
// - gateway: createGateway as bench/contestants/gateway.mjs makes it (the built package, its
//   defaults, the logger at "warn"), with the connection limits raised to the run's count and
//   the per-connection rate limit out of the way; its heartbeat (30 s) runs as by default.
// - raw-ws: a `ws` WebSocketServer with the least JSON-RPC that answers the same frames: a
//   subscribe adds the socket to the topic's Set and is answered with the topic's id, an
//   unsubscribe removes it, a publish builds one frame string and `ws.send`s it to each socket
//   of the topic's Set. No heartbeat, no validation, no limits. Several of them share no topic
//   space: the run hands each publish to every one of them (the harness is their broker).
import { benchLimits } from '../gateway-limits.mjs';
import { NATS_URL, REDIS_URL } from './local-brokers.mjs';

const DATA = { price: 97_000.25, symbol: 'BTC-USD' };

/** What every published message carries: `k` (which message) and `t` (when it was published, ms on the shared monotonic clock). */
const message = (k, t) => ({ k, t, ...DATA });

/**
 * A broker of its own for one node: `kind` 'redis' or 'nats', every node's with `prefix`. The
 * bound on the topics a node creates on the broker (100 a second, a burst of 1,000) is off: the
 * many-topics step publishes to 10,000 new topics through one node at once, and that bound is
 * there against abuse, as the limits bench/gateway-limits.mjs raises are.
 */
async function connectBroker({ kind, prefix, historyStorage }) {
  const creation = { newTopicsPerSecond: 0 };
  if (kind === 'redis') {
    const { RedisBroker } = await import('wsrpc-gateway/redis');
    return RedisBroker.create({
      url: REDIS_URL,
      prefix: `${prefix}:`,
      ...creation,
    });
  }
  if (kind === 'nats') {
    const { NatsBroker } = await import('wsrpc-gateway/nats');
    return NatsBroker.connect({
      servers: NATS_URL,
      prefix,
      ...(historyStorage && { historyStorage }),
      ...creation,
    });
  }
  throw new Error(`unknown broker ${kind}`);
}

export async function startGateway(host, { connections, broker: brokerSettings }) {
  // SCALE_GATEWAY_MODULE: another build to measure (a worktree's dist/src/index.js, for a
  // before-and-after), else the package's own dist/.
  const { createGateway } = await import(process.env.SCALE_GATEWAY_MODULE ?? 'wsrpc-gateway');
  const { pino } = await import('pino');
  const broker = brokerSettings && (await connectBroker(brokerSettings));
  const gateway = createGateway({
    logger: pino({ level: 'warn' }),
    ...(broker && { broker }),
    limits: {
      ...benchLimits,
      maxConnections: connections + 1_000,
      maxConnectionsPerIp: connections + 1_000,
    },
  });
  gateway.topic('all');
  gateway.topic('t.*');
  const { port } = await gateway.listen(0, host);
  let failure;
  const publish = (topic, data) => {
    gateway.publish(topic, data).catch((err) => (failure ??= err));
    if (failure) throw failure;
  };
  return {
    port,
    publish,
    /** A publish whose outcome is awaited (prepareTopics). */
    prepare: (topic, data) => gateway.publish(topic, data),
    message,
    async close() {
      await gateway.close({ timeoutMs: 1_000 });
      await broker?.close();
    },
  };
}

export async function startRawWs(host) {
  const { WebSocketServer } = await import('ws');
  /** topic -> { id, sockets } */
  const topics = new Map();
  /** subscription id -> topic */
  const byId = new Map();
  const topicOf = (name) => {
    let topic = topics.get(name);
    if (!topic) {
      topic = { id: '0x' + (topics.size + 1).toString(16), name, sockets: new Set() };
      topics.set(name, topic);
      byId.set(topic.id, topic);
    }
    return topic;
  };
  const wss = new WebSocketServer({ host, port: 0, perMessageDeflate: false });
  await new Promise((resolve) => wss.once('listening', resolve));
  wss.on('connection', (ws) => {
    /** The topics this socket is in, to leave them on close. */
    const held = [];
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString());
      const id = JSON.stringify(msg.id);
      if (msg.method === 'subscribe') {
        const topic = topicOf(msg.params[0]);
        topic.sockets.add(ws);
        held.push(topic);
        ws.send('{"jsonrpc":"2.0","result":"' + topic.id + '","id":' + id + '}');
      } else if (msg.method === 'unsubscribe') {
        const topic = byId.get(msg.params[0]);
        const had = topic?.sockets.delete(ws) ?? false;
        if (had) held.splice(held.indexOf(topic), 1);
        ws.send('{"jsonrpc":"2.0","result":' + had + ',"id":' + id + '}');
      } else {
        ws.send(
          '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":' + id + '}',
        );
      }
    });
    ws.on('close', () => {
      for (const topic of held) topic.sockets.delete(ws);
    });
  });
  return {
    port: wss.address().port,
    publish(name, data) {
      const topic = topics.get(name);
      if (!topic) return;
      const frame =
        '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"' +
        topic.id +
        '","result":' +
        JSON.stringify(data) +
        '}}';
      for (const ws of topic.sockets) ws.send(frame);
    },
    /** Nothing to make before a topic's first subscriber. */
    prepare: async () => undefined,
    message,
    close() {
      for (const ws of wss.clients) ws.terminate();
      return new Promise((resolve) => wss.close(() => resolve()));
    },
  };
}

export const starters = { gateway: startGateway, 'raw-ws': startRawWs };
export const names = { gateway: 'wsrpc-gateway', 'raw-ws': 'raw ws' };
