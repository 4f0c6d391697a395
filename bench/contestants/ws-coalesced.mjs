// (2) Raw `ws` echo with per-turn write coalescing: the same server as (1), but the
// first frame written to a socket in an event-loop turn corks its net.Socket and a
// setImmediate uncorks it (bench/cork.mjs): the floor for a gateway that coalesces.
export default {
  id: 'ws-coalesced',
  name: 'raw ws, coalesced writes',
  client: { kind: 'jsonrpc', path: '/', subscribe: { method: 'subscribe', params: ['bench'] } },
  async start(host) {
    const { startRawWs } = await import('./raw-ws.mjs');
    const { sendCoalesced } = await import('../cork.mjs');
    return startRawWs(host, sendCoalesced);
  },
};
