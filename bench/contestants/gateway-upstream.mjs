// (B) This gateway in gateway mode in front of the upstream (bench/upstream.mjs): `serve` from
// the built `wsrpc-gateway/standalone` with the configuration a file would give, `orders.*`
// routed to the upstream over HTTP with the upstream section's defaults (an undici keep-alive
// Pool of 16 connections, maxConcurrent 64, no retries). Changed from the defaults, as for the
// `gateway` contestant: the logger quieted to "warn", and the abuse limits raised out of the
// way of one load generator. Two rows share this server: one driven by the bench's raw
// JSON-RPC client, one by this project's own Node client.
import { benchLimits } from '../gateway-limits.mjs';

const limits = benchLimits;

export function gatewayUpstreamContestant({ id, name, client, clientBaselineId }) {
  return {
    id,
    name,
    only: 'upstream',
    ...(clientBaselineId && { clientBaselineId }),
    client: { path: '/rpc', method: 'orders.sum', ...client },
    async start(host, { upstreamUrl }) {
      const { resolveStandaloneConfig, serve } = await import('wsrpc-gateway/standalone');
      const { pino } = await import('pino');
      const config = resolveStandaloneConfig(
        {
          path: '/rpc',
          limits,
          listen: { host, port: 0 },
          upstreams: { orders: { url: upstreamUrl } },
          methods: { 'orders.*': 'orders' },
        },
        'the bench configuration',
      );
      const server = await serve(config, { logger: pino({ level: 'warn' }) });
      return {
        port: server.address.port,
        publish() {
          throw new Error(`${name}: the upstream scenarios publish nothing`);
        },
        close: () => server.close(),
      };
    },
  };
}

export default gatewayUpstreamContestant({
  id: 'gateway-upstream',
  name: 'gateway → upstream, raw ws client',
  client: { kind: 'jsonrpc' },
});
