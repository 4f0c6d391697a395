// This gateway as in gateway.mjs, driven by this project's own Node client (createClient from
// `wsrpc-gateway/client` on `ws`, bench/clients/wsrpc.mjs) instead of the bench's raw JSON-RPC
// client: `client.call('sum', [a, b])` and `client.subscribe('bench')`. The server is the same;
// the difference from the `gateway` row is the client's: its latency, and the load generator's
// CPU per call and per received message (× raw client: against the `gateway` row's).
import { gatewayContestant } from './gateway.mjs';

export default gatewayContestant({
  id: 'gateway-client',
  name: 'wsrpc-gateway, own client',
  only: ['requests', 'fanout'],
  client: { kind: 'wsrpc', method: 'sum', topic: 'bench' },
  clientBaselineId: 'gateway',
  countSubscribers: true,
});
