// The contestants, in report order. To add one: write an adapter next to these (an object
// with id, name, client and start(host) -> { port, publish(data), close() }) and list it here.
// The first one is the baseline every ratio is taken against. An adapter with `only: 'fanout'`
// takes part in the fan-out scenarios only, one with a list (`only: ['requests', 'fanout']`) in
// those kinds only (see takesPart in scenarios.mjs); the upstream
// scenarios take only the adapters with `only: 'upstream'`, and their tables' ratios are taken
// against upstream-direct (`direct`: the load generator calls the upstream, no server process).
// The presence scenario takes only the adapters with `only: 'presence'`; each of its tables
// names its rows and its baseline (the same gateway without presence). An adapter whose load
// is a client other than the bench's raw one names, as `clientBaselineId`, the adapter with the
// same server and the raw client: its client CPU ratios are taken against that one's.
import wsEcho from './ws-echo.mjs';
import wsCoalesced from './ws-coalesced.mjs';
import minimalJsonRpc from './minimal-jsonrpc.mjs';
import gateway from './gateway.mjs';
import gatewayClient from './gateway-client.mjs';
import gatewayParse from './gateway-parse.mjs';
import gatewayMsgpack from './gateway-msgpack.mjs';
import gatewayRedis from './gateway-redis.mjs';
import gatewayNats from './gateway-nats.mjs';
import rpcWebsockets from './rpc-websockets.mjs';
import jsonRpc2 from './json-rpc-2.0.mjs';
import socketIo from './socket-io.mjs';
import upstreamDirect from './upstream-direct.mjs';
import gatewayUpstream from './gateway-upstream.mjs';
import gatewayUpstreamClient from './gateway-upstream-client.mjs';
import gatewayPresenceOff from './gateway-presence-off.mjs';
import gatewayPresence from './gateway-presence.mjs';
import gatewayRedisPresenceOff from './gateway-redis-presence-off.mjs';
import gatewayRedisPresence from './gateway-redis-presence.mjs';
import gatewayDeflateOff from './gateway-deflate-off.mjs';
import gatewayDeflate from './gateway-deflate.mjs';
import wsDeflateOff from './ws-deflate-off.mjs';
import wsDeflate from './ws-deflate.mjs';

export const contestants = [
  wsEcho,
  wsCoalesced,
  minimalJsonRpc,
  gateway,
  gatewayClient,
  gatewayParse,
  gatewayMsgpack,
  gatewayRedis,
  gatewayNats,
  rpcWebsockets,
  jsonRpc2,
  socketIo,
  upstreamDirect,
  gatewayUpstream,
  gatewayUpstreamClient,
  gatewayPresenceOff,
  gatewayPresence,
  gatewayRedisPresenceOff,
  gatewayRedisPresence,
  gatewayDeflateOff,
  gatewayDeflate,
  wsDeflateOff,
  wsDeflate,
];

export const baseline = wsEcho;
