// (B') The same gateway in front of the same upstream, called with this project's own Node
// client (createClient from `wsrpc-gateway/client` on `ws`) instead of the raw JSON-RPC
// client: what an application using the client sees. See gateway-upstream.mjs.
import { gatewayUpstreamContestant } from './gateway-upstream.mjs';

export default gatewayUpstreamContestant({
  id: 'gateway-upstream-client',
  name: 'gateway → upstream, wsrpc client',
  client: { kind: 'wsrpc' },
  clientBaselineId: 'gateway-upstream',
});
