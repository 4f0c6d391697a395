// (5) rpc-websockets' Server, as its README shows: register() a method, event() an event,
// emit() it. Its own subscription protocol: the client calls "rpc.on" with the event
// names, the server answers {"bench":"ok"} and then sends
// {"notification":"bench","params":<data>} (encoded once per subscriber).
export default {
  id: 'rpc-websockets',
  name: 'rpc-websockets 10.0.1',
  client: { kind: 'jsonrpc', path: '/', subscribe: { method: 'rpc.on', params: ['bench'] } },
  async start(host) {
    const { Server } = await import('rpc-websockets');
    const server = new Server({ host, port: 0 });
    await new Promise((resolve) => server.once('listening', resolve));
    server.register('sum', ([a, b]) => a + b);
    server.event('bench');
    return {
      port: server.wss.address().port,
      publish: (data) => server.emit('bench', data),
      close: () => server.close(),
    };
  },
};
