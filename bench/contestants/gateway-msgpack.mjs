// This gateway as in gateway.mjs, with MessagePack on (`encodings: ['json', 'msgpack']`) and
// its load-generator clients choosing it (subprotocol jsonrpc-2.0+msgpack): requests, replies
// and fan-out frames are MessagePack, everything else as for `gateway`.
import { gatewayContestant } from './gateway.mjs';

export default gatewayContestant({
  id: 'gateway-msgpack',
  name: 'wsrpc-gateway, MessagePack',
  client: { encoding: 'msgpack' },
  options: { encodings: ['json', 'msgpack'] },
});
