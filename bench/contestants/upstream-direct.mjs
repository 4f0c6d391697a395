// (A) The baseline of the upstream scenarios: no gateway. The load generator POSTs
// `orders.sum` to the upstream (bench/upstream.mjs) itself, on an undici keep-alive Pool with
// the gateway's default pool settings (16 connections, one request at a time on each), as a
// backend calling the service directly would. `direct`: no server process of its own; the
// runner points the client at the upstream's URL.
export default {
  id: 'upstream-direct',
  name: 'upstream direct (HTTP)',
  only: 'upstream',
  direct: true,
  client: { kind: 'http', method: 'orders.sum', connections: 16 },
};
