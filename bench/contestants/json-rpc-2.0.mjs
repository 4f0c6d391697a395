// (6) json-rpc-2.0 over `ws`, wired as its README's WebSocket example: one shared
// JSONRPCServer, and per connection a JSONRPCServerAndClient whose client half sends
// JSON.stringify(payload) on the socket. The library has no pub/sub: "subscribe" is an
// ordinary method, and a publish is serverAndClient.notify("subscription", ...) to each
// subscriber (one notification object and one JSON.stringify per subscriber).
export default {
  id: 'json-rpc-2.0',
  name: 'json-rpc-2.0 1.8.1 on ws',
  client: { kind: 'jsonrpc', path: '/', subscribe: { method: 'subscribe', params: ['bench'] } },
  async start(host) {
    const { JSONRPCClient, JSONRPCServer, JSONRPCServerAndClient } = await import('json-rpc-2.0');
    const { WebSocketServer } = await import('ws');
    const subscribers = new Set();
    const server = new JSONRPCServer();
    server.addMethod('sum', ([a, b]) => a + b);
    server.addMethod('subscribe', (_params, { peer }) => {
      subscribers.add(peer);
      return '0x1';
    });
    const wss = new WebSocketServer({ host, port: 0, perMessageDeflate: false });
    await new Promise((resolve) => wss.once('listening', resolve));
    wss.on('connection', (ws) => {
      const peer = new JSONRPCServerAndClient(
        server,
        new JSONRPCClient((payload) => {
          try {
            ws.send(JSON.stringify(payload));
            return Promise.resolve();
          } catch (err) {
            return Promise.reject(err);
          }
        }),
      );
      ws.on('message', (data) => void peer.receiveAndSend(JSON.parse(data.toString()), { peer }));
      ws.on('close', () => {
        subscribers.delete(peer);
        peer.rejectAllPendingRequests('Connection is closed.');
      });
    });
    return {
      port: wss.address().port,
      publish(data) {
        for (const peer of subscribers)
          peer.notify('subscription', { subscription: '0x1', result: data });
      },
      close() {
        for (const ws of wss.clients) ws.terminate();
        return new Promise((resolve) => wss.close(() => resolve()));
      },
    };
  },
};
