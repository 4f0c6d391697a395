// (1) Raw `ws` echo: the floor every ratio is taken against. See raw-ws.mjs for what "echo" does.
export default {
  id: 'ws-echo',
  name: 'raw ws echo',
  client: { kind: 'jsonrpc', path: '/', subscribe: { method: 'subscribe', params: ['bench'] } },
  async start(host) {
    const { startRawWs } = await import('./raw-ws.mjs');
    return startRawWs(host, (ws, frame) => ws.send(frame));
  },
};
