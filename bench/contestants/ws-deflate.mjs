// The compression scenario's raw `ws` rows (see raw-ws.mjs): with ws's own permessage-deflate,
// which compresses a broadcast once per socket (no context takeover either way, threshold
// 1 KiB, as the gateway negotiates), or without it.
const client = {
  kind: 'jsonrpc',
  path: '/',
  subscribe: { method: 'subscribe', params: ['bench'] },
  deflate: true,
};

export function rawDeflate({ id, name, perMessageDeflate }) {
  return {
    id,
    name,
    only: 'deflate',
    client,
    async start(host) {
      const { startRawWs } = await import('./raw-ws.mjs');
      return startRawWs(host, (ws, frame) => ws.send(frame), { perMessageDeflate });
    },
  };
}

export default rawDeflate({
  id: 'ws-deflate',
  name: 'raw ws, deflate per socket',
  perMessageDeflate: {
    serverNoContextTakeover: true,
    clientNoContextTakeover: true,
    threshold: 1024,
  },
});
