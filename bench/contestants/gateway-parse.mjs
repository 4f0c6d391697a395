// This gateway as in gateway.mjs, its fan-out received by the bench's raw client with every
// frame JSON.parse'd (the counter read from the parsed message) instead of found by indexOf:
// what any application receiving the messages pays at least, next to `gateway-client`, so the
// client CPU of this project's client can be read against a raw client that parses as it does.
import { gatewayContestant } from './gateway.mjs';

export default gatewayContestant({
  id: 'gateway-parse',
  name: 'wsrpc-gateway, raw client parsing each message',
  only: 'fanout',
  client: { parseEvery: true },
  clientBaselineId: 'gateway',
});
