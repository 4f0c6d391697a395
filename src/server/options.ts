import type { TransportKind } from '../transport/transport.js';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Logger } from '../peer/logger.js';
import type { Middleware } from '../peer/middleware.js';
import { cut, describe, isRecord } from '../peer/option-rules.js';
import type { Broker, Retention } from '../pubsub/broker.js';
import type { Params } from '../protocol/types.js';
import type { SubscriptionMethods } from './pubsub-service.js';
import type { Session } from './session.js';
import type { ClusterEventsOptions } from './lifecycle-options.js';
import { refuseUnknownKey } from './lifecycle-options.js';
import type { PerMessageDeflateOptions } from './deflate-options.js';
import { DEFAULT_MESSAGE_COST_BYTES } from '../transport/ws-transport.js';
import { MAX_ENCODED_DEPTH } from '../encoding/encoded-depth.js';

/** What the authenticate hook sees of an upgrade request. */
export interface UpgradeRequest {
  /** How the client is connecting: a WebSocket upgrade, an HTTP POST, TCP or stdio. */
  readonly transport: TransportKind;
  /** The HTTP request (WebSocket upgrade or POST); absent for TCP and stdio, which have no headers. */
  readonly request: IncomingMessage | undefined;
  readonly headers: IncomingMessage['headers'];
  readonly url: URL;
  readonly query: URLSearchParams;
  readonly cookies: Readonly<Record<string, string>>;
  /** Subprotocols the client offered (Sec-WebSocket-Protocol), in order. */
  readonly protocols: readonly string[];
  /**
   * The client's address: the socket's peer or, when that peer is one of `trustedProxies`,
   * the address its X-Forwarded-For header names (`request.socket.remoteAddress` is the peer).
   */
  readonly remoteAddress: string | undefined;
  /**
   * The credentials presented: the token of an `Authorization: Bearer <token>` header (an
   * upgrade or a POST), or the `token` of an in-band `rpc.authenticate`; undefined when none.
   */
  readonly token: string | undefined;
  /**
   * When the hook runs: at the `upgrade` (or POST, TCP, stdio connection), for an `in-band`
   * `rpc.authenticate` of a connection accepted unauthenticated, or to `refresh` the identity
   * of an authenticated one. In-band and refresh calls see the upgrade's headers, cookies and
   * address with the new token.
   */
  readonly phase: 'upgrade' | 'in-band' | 'refresh';
}

/**
 * Identity over the life of a connection (see docs/identity.md): in-band authentication,
 * expiry and refresh, authorization from the context's claims.
 */
export interface IdentityOptions<C> {
  /**
   * Accept a connection that carries no token unauthenticated: it must send `rpc.authenticate`
   * within `inBandDeadlineMs` (else close 4408); 3 refusals close it with 4401. A connection
   * with a Bearer token is authenticated at the upgrade as before. Default false.
   */
  inBand?: boolean;
  /**
   * With `inBand`: whether a request carries credentials `authenticate` reads, and so is
   * authenticated at the upgrade rather than accepted unauthenticated. Default: a Bearer token
   * (`request.token`). `jwtAuth` sets it to where it reads tokens (a cookie, a subprotocol).
   */
  carriesToken?: (request: UpgradeRequest) => boolean;
  /** How long an in-band connection has to authenticate, in ms. Default 10 000. */
  inBandDeadlineMs?: number;
  /** When the session's identity expires (ms since the epoch); undefined: never. */
  expiresAtOf?: (context: C) => number | undefined;
  /** How long before `expiresAtOf` the server asks the client for a fresh token (`rpc.token`), in ms. Default 30 000. */
  refreshAheadMs?: number;
  /**
   * Topic patterns the session may subscribe to (exact names, or prefixes ending in `*`);
   * undefined: no restriction. Checked before the topic's own `authorize`.
   */
  topicsOf?: (context: C) => readonly string[] | undefined;
  /**
   * Method patterns the session may call or notify (exact names, or prefixes ending in `*`);
   * undefined: no restriction. Checked before `authorize`; the subscribe and unsubscribe
   * methods and the reserved `rpc.` ones are not restricted by it.
   */
  methodsOf?: (context: C) => readonly string[] | undefined;
  /** When the credentials were issued (ms since the epoch): a later one outlives a revocation. */
  issuedAtOf?: (context: C) => number | undefined;
}

export interface TlsOptions {
  cert: string | Buffer;
  key: string | Buffer;
  /** Passphrase of an encrypted key. */
  passphrase?: string;
  /** Extra certificate authorities (PEM), e.g. for an intermediate chain. */
  ca?: string | Buffer | (string | Buffer)[];
}

export interface GatewayLimits {
  /** Largest incoming message in bytes; larger ones close the socket with 1009. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Longest batch; longer ones get one -32002 error. Default 100. */
  maxBatch?: number;
  /**
   * Deepest JSON nesting; deeper messages get -32600 with `data: { maxDepth }`. Default 64, at
   * most 512 (MAX_ENCODED_DEPTH: what comes in may be sent back, in MessagePack or CBOR too).
   */
  maxDepth?: number;
  /**
   * Most JSON values one incoming message may hold: each object, array, string, number,
   * true, false and null counts one (`[{},{}]` is 3; keys do not count). More gets -32600 with
   * `data: { maxJsonValues }`, id null. Counted on the text, in the pass that measures its
   * depth, before and instead of parsing it: a message of many tiny values is slow to parse
   * (a MiB of `{},` takes a quarter of a second) and would stall every connection. Texts too
   * short to hold more (2 × maxJsonValues characters or fewer) are not scanned. Default 10 000.
   */
  maxJsonValues?: number;
  /** Incoming calls running at once per connection; beyond it -32000 Server busy. Default 128. */
  maxInFlight?: number;
  /** Server-to-client calls awaiting an answer per connection. Default 256. */
  maxPendingCalls?: number;
  /** Subscriptions (topics and streams) open at once per connection; beyond it -32005. Default 100. */
  maxSubscriptions?: number;
  /**
   * Longest topic name a subscribe may name, in UTF-8 bytes (a name is kept, by this node and
   * by the broker, for as long as its subscription lives); longer ones get -32602 with
   * `data: { limit, bytes }`, the name not echoed. Default 256.
   */
  maxTopicNameBytes?: number;
  /**
   * UTF-8 bytes of topic names (of topic and `$presence` subscriptions) and of the params kept
   * for them (JSON, only for a topic with `authorize`) the subscriptions of one connection may
   * hold together; a subscribe beyond it gets -32005 with `data: { limit, bytes }`. Default
   * 16 384.
   */
  maxTopicBytesPerConnection?: number;
  /**
   * History reads (resume replays, one page at a time) one connection has under way at once;
   * its other resumes wait their turn, their live messages held as during any replay. Default 2.
   */
  maxHistoryReadsPerConnection?: number;
  /**
   * History reads this node has under way on the broker at once, all connections together;
   * further ones wait their turn (identical reads made together count once). Default 16.
   */
  maxHistoryReads?: number;
  /**
   * Subscribes per second, per connection, to topics this node does not hold yet (each
   * subscribes the topic on the broker: a NATS consumer, a Redis channel); beyond it -32003.
   * Subscribes create no stream or key on the broker. 0 disables. Default 10.
   */
  newTopicSubscribesPerSecond?: number;
  /**
   * How many such subscribes may come at once before `newTopicSubscribesPerSecond` applies.
   * Default 200.
   */
  newTopicSubscribesBurst?: number;
  /**
   * Subscribes per second to topics this node does not hold yet (as `newTopicSubscribesPerSecond`)
   * of all connections from one address together (an IPv4 address, an IPv6 /64, as
   * `maxConnectionsPerIp` counts): each such subscribe takes from the connection's budget and
   * from its address's; -32003 when either is empty. The address's budget is kept after its
   * last connection closes until it has refilled, so reconnecting does not refill it. 0
   * disables. Default 50 (5 connections' worth).
   */
  newTopicSubscribesPerSecondPerIp?: number;
  /**
   * How many such subscribes one address may make at once before
   * `newTopicSubscribesPerSecondPerIp` applies. Default 1 000.
   */
  newTopicSubscribesBurstPerIp?: number;
  /**
   * Topics this node holds on the broker at once for its clients: every topic with a subscriber
   * on the node and every topic whose `$presence` it watches (each a broker channel or consumer
   * and its local state, about 10 KB of heap). A subscribe that would add one past it is answered
   * -32000 Server busy with `data: { maxTopics }`; subscribes to topics already held go on. Topics
   * the gateway holds for itself (users' inboxes) count but are never refused. Default 100 000.
   */
  maxTopics?: number;
  /** Open connections in total; beyond it upgrades get 503. Default 10 000. */
  maxConnections?: number;
  /** Open connections from one IP address; beyond it upgrades get 429. Default 100. */
  maxConnectionsPerIp?: number;
  /**
   * Open connections from one IPv6 /48 together (an end site's prefix: a subscriber is often
   * delegated a /56 or a whole /48, so its 256 or 65 536 /64s, each counted alone by
   * `maxConnectionsPerIp`, could otherwise hold every slot of `maxConnections`); beyond it
   * upgrades get 429. Default 10 × `maxConnectionsPerIp` (1 000 with its default), so that a
   * raised `maxConnectionsPerIp` is never capped by it unawares.
   */
  maxConnectionsPerIpv6Site?: number;
  /**
   * Sessions of one user (as `userOf` names it) on this node, wherever they connect from, so one
   * account cannot hold every slot of `maxConnections`; a cluster bounds it per node. Counted
   * from when the session's user is known until it closes; sessions without a user do not
   * count. Beyond it an upgrade authenticated at the handshake gets 429 (a TCP connection a
   * refusal line); an in-band `rpc.authenticate` gets -32000 with `data: { maxConnectionsPerUser }`
   * and the connection is closed with 4429. Default 1 000.
   */
  maxConnectionsPerUser?: number;
  /**
   * New connections per second from one address (an IPv4 address, an IPv6 /64, as
   * `maxConnectionsPerIp` counts), a token bucket per address: each WebSocket upgrade, event
   * stream or TCP connection admitted takes one (HTTP POST exchanges take none); beyond it 429
   * with `Retry-After` (the seconds until a token, at least 1), a TCP connection a refusal line.
   * Every connection starts with full per-connection budgets (`rateBurst`, `bytesPerSecond`, ...),
   * so without it an address that closes and reopens connections refills them at will. The
   * address's bucket is kept after its last connection closes until it has refilled. 0
   * disables. Default 20.
   */
  connectionsPerSecondPerIp?: number;
  /**
   * How many connections one address may open at once before `connectionsPerSecondPerIp`
   * applies. Default 100 (`maxConnectionsPerIp`'s default: all of an address's clients can
   * reconnect together after a restart).
   */
  connectionsBurstPerIp?: number;
  /**
   * Incoming messages per second per connection (token bucket): requests beyond it get -32003,
   * notifications are dropped; responses and invalid messages take tokens too but are handled
   * as usual. 0 disables. Default 1 000.
   */
  ratePerSecond?: number;
  /** Bucket size: how many may arrive at once before the rate applies. Default 2 000. */
  rateBurst?: number;
  /**
   * Bytes per second a WebSocket connection may send (message payloads as received), a token
   * bucket holding 2 × `maxMessageBytes` so a message of the largest size always passes. A
   * connection that reads past it has its socket paused, not refused: nothing is lost, TCP
   * back-pressure slows the client, and reading resumes once the budget has refilled what was
   * read beyond it. Bounds the parsing a connection can ask of the gateway's one thread, which
   * `ratePerSecond` (a count of messages) does not. 0 disables. Default 1 MiB (1 048 576).
   */
  bytesPerSecond?: number;
  /**
   * Bytes per second the WebSocket connections from one address (an IPv4 address, an IPv6 /64,
   * as `maxConnectionsPerIp` counts) may send together: each message is counted against its
   * connection's `bytesPerSecond` and against its address's budget (a bucket holding 2 ×
   * `maxMessageBytes`, as a connection's does), and the connection pauses for the longer of the
   * two waits; nothing is lost. Without it one address gets `maxConnectionsPerIp` ×
   * `bytesPerSecond`. The address's budget is kept after its last connection closes until it has
   * refilled, so reconnecting does not refill it. 0 disables. Default 8 MiB (8 388 608).
   */
  bytesPerSecondPerIp?: number;
  /**
   * The least a WebSocket message costs against `bytesPerSecond` and `bytesPerSecondPerIp`,
   * however few its bytes: each text or binary message, each ping and pong the peer sends, and
   * each member of a batch after the first. Reading a frame, and refusing or answering what it
   * carries, costs the gateway about as much as parsing this many bytes of an ordinary request,
   * whatever the frame holds: without it a flood of empty frames costs the budget nothing. On a
   * connection that negotiated `perMessageDeflate`, where inflating each message costs far more,
   * a message costs at least 16 times this. 0: a message costs its bytes alone. Default 256.
   */
  messageCostBytes?: number;
  /**
   * Read-side back-pressure: once handling an incoming message leaves more than this many
   * bytes queued for a connection (WebSocket, TCP, stdio) that is not reading its replies, the
   * gateway stops reading from it until its write buffer has drained to half of this; nothing
   * already received is lost. Keep topics' and streams' `highWaterMark` (default 1 MiB) below
   * it, so slow-consumer policies act before reading stops. An HTTP streaming session whose
   * event stream holds more than this with nothing of it leaving for 5 s, or 16 times this at
   * any moment, is closed (1008). A WebSocket or TCP connection whose output stays above it
   * from one heartbeat to the next, nothing of it written, is closed as not reading; that output
   * includes the live messages its subscriptions hold back while history is replayed. 0
   * disables. Default 4 MiB.
   */
  maxBufferedBytes?: number;
  /**
   * Bytes queued for all connections together (WebSocket, TCP, stdio), a bound on what
   * `maxBufferedBytes` per connection allows in total (10 000 × 4 MiB = 40 GiB). Beyond it the
   * connections with the most queued are closed with 1013 (Try Again Later), largest first,
   * until the total is back within it. Counted as bytes queued per connection, so a fan-out
   * frame queued for many subscribers counts once for each. A connection's share includes the
   * live messages its subscriptions hold back while history is replayed. 0 disables. Default
   * 512 MiB.
   */
  maxBufferedBytesTotal?: number;
  /**
   * After a TCP or stdio peer ends its input (EOF, TCP half-close), how long the calls it sent
   * may take to be answered and their answers to be written and read, however slowly it reads,
   * before the connection is cut. Default 30 000 ms.
   */
  endOfInputDeadlineMs?: number;
  /**
   * Sockets open on the HTTP port that are not WebSocket sessions (yet): connections whose
   * first request is still arriving, upgrades being authenticated, HTTP requests, idle
   * keep-alive connections; and TLS handshakes under way on `listenTcp`. Counted from the
   * socket's 'connection' event, before a byte is read; one beyond it is destroyed at once.
   * Default 2 000. On a `server` the gateway did not create, this and the next two apply only
   * when set (each on its own), and then to every socket of that server, the application's too.
   */
  maxHttpSockets?: number;
  /**
   * The same, from one address (an IPv6 address counts by its /64). A trusted proxy's sockets
   * count only against `maxHttpSockets`: its clients are told apart by X-Forwarded-For, which
   * is read with the headers. Default 200.
   */
  maxHttpSocketsPerIp?: number;
  /**
   * Requests per second from one address (an IPv4 address, an IPv6 /64, as
   * `maxConnectionsPerIp` counts; the client's address once trusted proxies are looked
   * through) to the gateway's operational routes: `routes.livez`, `readyz`, `metrics`,
   * `openrpc`, and a plain GET or other method on the WebSocket path or `routes.rpc` (not
   * JSON-RPC POSTs, CORS preflights or the event stream, which have limits of their own). A
   * token bucket per address group; beyond it 429 with `Retry-After` (the seconds until a
   * token, at least 1) and `Connection: close`, counted in `rpc_http_sockets_closed_total`
   * as `probe-rate`. An orchestrator probes every few seconds and a scraper every few, far
   * below it; a loop of scrapes or probes from one address cannot take the event loop from
   * the sessions. The address's bucket is kept until it has refilled, at most
   * `maxHttpSockets` of them. 0 disables. Default 20.
   */
  probeRequestsPerSecondPerIp?: number;
  /**
   * How many operational requests one address may make at once before
   * `probeRequestsPerSecondPerIp` applies. Default 40: the probes of every container of a pod,
   * a few scrapers and a person's curl, all from one node's address, at the same moment.
   */
  probeRequestsBurstPerIp?: number;
  /**
   * How long (ms) the text of `routes.metrics` is reused after it was rendered: a render walks
   * every local topic and reads the process's file descriptors, so concurrent scrapes share
   * one render, and scrapes within this time get its text. 0: every scrape renders (still one
   * at a time, shared by the scrapes that arrive while it runs). Default 1 000.
   */
  metricsCacheMs?: number;
  /**
   * A connection to the HTTP port must have sent its first request's whole header block (TLS
   * handshake included) this many ms after it opened, or it is destroyed; later requests on a
   * keep-alive connection get Node's `headersTimeout`, set to this. A TLS connection to
   * `listenTcp` must have done its handshake by then. Default 10 000.
   */
  headersTimeoutMs?: number;
  /**
   * A JSON-RPC POST body must have arrived this many ms after reading began, or 408. With
   * `headersTimeoutMs` it also bounds a whole request on the gateway's own server (Node's
   * `requestTimeout`). Default 30 000.
   */
  bodyTimeoutMs?: number;
  /**
   * The `authenticate` hook must settle within this many ms, or the connection is refused with
   * 503 (a TCP or stdio refusal line), and its admission slot freed: a hook that hangs (an
   * identity provider that does not answer) cannot hold slots forever. Default 10 000.
   */
  authenticateTimeoutMs?: number;
  /**
   * HTTP streaming sessions (`routes.events`): the bytes of sent events each keeps so a dropped
   * stream can resume by Last-Event-ID; a resume from before what is kept closes the session
   * (1008). Default 1 MiB.
   */
  sseReplayBytes?: number;
  /** How long an HTTP streaming session keeps a sent event for a resume. Default 60 000 ms. */
  sseReplayMs?: number;
  /**
   * How long an HTTP streaming session waits for its dropped event stream to come back before
   * it is closed (1001). Default 30 000 ms.
   */
  sseGraceMs?: number;
}

/**
 * The gateway's own HTTP routes, each a path (starting with "/") or `false` for none. On a
 * `server` it did not create, these and the WebSocket `path` are all the gateway answers.
 */
export interface GatewayRoutes {
  /** Liveness: 200 `{"status":"ok"}` while the process runs. Default "/livez". */
  livez?: string | false;
  /** Readiness: 200 when ready, else 503 with the reason. Default "/readyz". */
  readyz?: string | false;
  /** Prometheus metrics (off with `metrics: false` too). Default "/metrics". */
  metrics?: string | false;
  /** The OpenRPC document, once `serveDiscovery` (or `implementContract`) gave one. Default "/openrpc.json". */
  openrpc?: string | false;
  /** JSON-RPC over HTTP POST. Default: `path`, the WebSocket's. */
  rpc?: string | false;
  /**
   * The HTTP streaming fallback (Server-Sent Events down, POST up) for clients that cannot
   * open a WebSocket, such as "/rpc/events". Default false (off).
   */
  events?: string | false;
}

/**
 * The options that are data (numbers, strings, booleans and objects of them): what a
 * configuration file can hold. `resolveGatewayOptions` checks them the same way wherever they
 * come from.
 */
export interface GatewayDataOptions {
  /** WebSocket endpoint path. Default "/rpc". */
  path?: string;
  /**
   * Where the gateway's HTTP routes are, or `false` to turn one off: `livez` ("/livez"),
   * `readyz` ("/readyz"), `metrics` ("/metrics"), `openrpc` ("/openrpc.json") and `rpc`
   * (JSON-RPC over POST; default `path`). Checked when the gateway is made: a TypeError or
   * RangeError names the route.
   */
  routes?: GatewayRoutes;
  /**
   * Origins allowed to open a WebSocket (exact strings such as "https://app.example.com",
   * or a predicate); others get 403. Each entry must be an origin as browsers send it (scheme,
   * host, a port other than the scheme's; no path, no trailing slash): any other is refused with
   * a RangeError, since no browser would match it. "null" is refused too, saying why: every
   * sandboxed iframe and `file:` page sends it, so any site can by framing itself sandboxed; a
   * predicate that returns true for it allows it knowingly. `["*"]` (that entry alone) admits
   * every origin. Requests without an Origin header (non-browser clients) are not affected.
   * Default: pages on the host the request was sent to (the Origin's host name is the Host
   * header's, any port; an https page when the request came over TLS, on the gateway's socket or
   * by a trusted proxy's X-Forwarded-Proto), since browsers send cookies with upgrades from any
   * site (cross-site WebSocket hijacking).
   */
  allowedOrigins?: readonly string[] | ((origin: string) => boolean);
  /**
   * Reverse proxies (addresses or CIDR subnets, IPv4 or IPv6: "10.0.0.0/8", "::1") whose
   * X-Forwarded-For header is believed. When a WebSocket upgrade or HTTP POST comes from one,
   * the client's address is the right-most X-Forwarded-For entry that is not itself a trusted
   * proxy; it is what per-IP connection limits, HTTP rate buckets, `remoteAddress` and the logs
   * use; such a proxy's X-Forwarded-Proto (first entry) tells the default origin check whether
   * the browser's request was TLS. Default: none, and X-Forwarded-For is ignored (anyone can send one). TCP connections
   * carry no such header and always count their peer.
   */
  trustedProxies?: readonly string[];
  /**
   * Refuse new WebSocket upgrades and TCP connections with 503 + Retry-After while the broker
   * is not ready (`broker.ready`) or has not yet taken the node's own subscriptions (what
   * /readyz reports as `broker-unavailable`), so a load balancer that does not poll
   * /readyz retries them on another node. Sessions already open stay; HTTP POSTs are served
   * as usual (a publish among them fails with -32009). Default true.
   */
  refuseWhileBrokerDown?: boolean;
  limits?: GatewayLimits;
  /** Default timeout of server-to-client calls in ms; 0 waits forever. Default 30 000. */
  callTimeoutMs?: number;
  /** @deprecated Use `callTimeoutMs`. */
  callTimeout?: number;
  /**
   * Ping every this many ms; a client that has not answered the previous ping is dropped.
   * Also the TCP keepalive delay of `listenTcp` sockets. Default 30 000; 0 disables.
   */
  heartbeatIntervalMs?: number;
  /** @deprecated Use `heartbeatIntervalMs`. */
  heartbeatInterval?: number;
  /**
   * WebSocket compression (permessage-deflate, RFC 7692), negotiated with clients that offer
   * it; `true` takes the defaults of the object form. Off by default. Every message is
   * compressed on its own (no context takeover), so a topic broadcast is compressed once and
   * the same compressed frame written to every subscriber that negotiated it. See
   * docs/transports.md, "Compression".
   */
  perMessageDeflate?: boolean | PerMessageDeflateOptions;
  /**
   * Presence: how long this node's members stay in the broker unless it renews its lease (it
   * does every third of this); a node that dies has its members removed by another within
   * twice this. Default 15 000 ms.
   */
  presenceLeaseMs?: number;
  /** Presence: join/leave events are gathered into one per topic per this many ms. Default 250. */
  presenceCoalesceMs?: number;
  /**
   * Keep each user's messages (`gateway.notifyUser`) numbered in a bounded history, so a
   * client that subscribes `$inbox` gets every one exactly once, in order, across reconnects
   * to any node (a gap signal past retention). `true` for the defaults. Needs `userOf`.
   * Default off: `notifyUser` reaches the sessions connected at that moment, at most once.
   */
  userInbox?: boolean | UserInboxOptions;
  /**
   * Send this node's lifecycle events (`gateway.events$`) and its users' comings and goings to
   * every node sharing the broker, so that `events$` carries every node's and `userOnline$` /
   * `userOffline$` are true of the whole cluster. `true` for the defaults. Default off: each
   * gateway sees its own sessions only.
   */
  clusterEvents?: boolean | ClusterEventsOptions;
  /** Names of the subscribe, notification and unsubscribe methods (e.g. eth_subscribe, eth_subscription, eth_unsubscribe). */
  subscriptionMethods?: Partial<SubscriptionMethods>;
  /** Serve Prometheus metrics at GET /metrics. Default true. */
  metrics?: boolean;
  /** Answer JSON-RPC 1.0 peers in their own shape. Default false. */
  acceptV1?: boolean;
  /** Put internal error messages and stacks in error.data (debug only). Default false. */
  exposeErrorDetails?: boolean;
  /**
   * A binary WebSocket frame on a JSON connection: 'refuse' closes the connection with 1003
   * (Unsupported Data); 'text' reads it as UTF-8 JSON text, for clients that send JSON in
   * binary frames. Default 'refuse'.
   */
  binaryJsonFrames?: 'refuse' | 'text';
}

/** The options that are code or live objects (hooks, a server, a broker, a logger, TLS keys). */
export interface GatewayCodeOptions<C> {
  /**
   * Bring your own HTTP(S) server (an Express or Fastify app's, one that other WebSocket
   * endpoints share); otherwise one is created. On a server it did not create, the gateway
   * answers only its WebSocket `path` and its `routes`, and leaves every other request and
   * upgrade to the server's other listeners (see docs/server.md, "Sharing a server").
   */
  server?: HttpServer;
  /**
   * Decide who may connect: return the session's context, or throw
   * `new UpgradeRejection(401)` (any 4xx/5xx) to refuse before the upgrade completes.
   */
  authenticate?: (request: UpgradeRequest) => C | Promise<C>;
  /**
   * Decide per call whether a session may call a method (or send a notification);
   * false answers -32004 Unauthorized and the connection stays open.
   */
  authorize?: (request: {
    session: Session<C>;
    method: string;
    params: Params | undefined;
  }) => boolean | Promise<boolean>;
  /**
   * Pick the subprotocol to answer with. Default: the first offered among those of the
   * `encodings` on ("jsonrpc-2.0", "jsonrpc-2.0+msgpack", "jsonrpc-2.0+cbor"), else the first
   * one offered (so a token sent as a second subprotocol is never echoed). The answer picks the
   * connection's encoding; any other answer means JSON.
   */
  selectProtocol?: (offered: readonly string[], request: UpgradeRequest) => string | false;
  /**
   * Encodings a client may choose by subprotocol besides JSON, which is always on: 'msgpack'
   * (`jsonrpc-2.0+msgpack`, needs the package msgpackr) and 'cbor' (`jsonrpc-2.0+cbor`, needs
   * cbor-x). Default ['json'].
   */
  encodings?: readonly ('json' | 'msgpack' | 'cbor')[];
  /**
   * Serve https:// and wss:// (and TLS on `listenTcp`) with this certificate and key (PEM).
   * `tlsFromEnv` reads them from TLS_CERT_FILE and TLS_KEY_FILE. Ignored with `server`.
   */
  tls?: TlsOptions;
  /**
   * Handles plain HTTP requests the gateway does not serve itself; return false for 404. On a
   * `server` you pass, it sees the requests none of the gateway's routes take, as the server's
   * other listeners do, and the 404 is sent only when the server has no other 'request' listener.
   */
  httpHandler?: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;
  /** Where the gateway logs. Default: a pino logger at level info (LOG_LEVEL). */
  logger?: Logger;
  /** The user a session belongs to, from its context, so `gateway.notifyUser` can reach it on any node. */
  userOf?: (context: C) => string | undefined;
  /** Where topics live. Default: a MemoryBroker (one node, nothing else needed). */
  broker?: Broker;
  /**
   * Functions around the handlers of calls, notifications and subscribes, first to last, after
   * the rate limit, the method lookup and `authorize` (see docs/middleware.md).
   */
  middleware?: readonly Middleware<Session<C>>[];
  /** Identity over the connection's life: in-band authentication, refresh, expiry, claims (docs/identity.md). */
  identity?: IdentityOptions<C>;
}

/** What `createGateway` takes: the data options and the code options. See docs/options.md. */
export interface GatewayOptions<C> extends GatewayDataOptions, GatewayCodeOptions<C> {}

/** What the broker keeps of each user's messages, and how new sessions are told apart. */
export interface UserInboxOptions {
  /** Most recent messages kept per user. Default 100 (1 to 100 000). */
  maxLength?: number;
  /** Messages older than this are not replayed. Default 600 000 ms (1 000 ms to 30 days). */
  maxAgeMs?: number;
  /**
   * A new session of the user says with its first call how it takes the user's messages: a
   * `$inbox` subscribe (through the inbox) or anything else (as plain notifications). Until it
   * does, or for this long after it opened, the user's messages are held for it (at most
   * `maxLength`) and then sent plain. Default 2 000 ms (0 to 60 000).
   */
  holdMs?: number;
}

/** `userInbox` checked and with its defaults filled in. */
export interface ResolvedUserInbox {
  retention: Retention;
  holdMs: number;
}

export const defaultUserInbox: Required<UserInboxOptions> = {
  maxLength: 100,
  maxAgeMs: 600_000,
  holdMs: 2_000,
};

const USER_INBOX_BOUNDS: Record<keyof UserInboxOptions, [number, number, string]> = {
  maxLength: [1, 100_000, '1 to 100000'],
  maxAgeMs: [1_000, 30 * 24 * 3_600_000, '1000 to 2592000000 (30 days)'],
  holdMs: [0, 60_000, '0 to 60000'],
};

/**
 * Check `GatewayOptions.userInbox` once, when the gateway is made: undefined when off; a
 * TypeError or RangeError naming the option when it is not usable.
 */
export function resolveUserInbox(
  value: unknown,
  hasUserOf: boolean,
): ResolvedUserInbox | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && !isRecord(value)) {
    throw new TypeError('userInbox must be true, false or { maxLength, maxAgeMs, holdMs }');
  }
  if (!hasUserOf) {
    throw new TypeError('userInbox needs userOf: the inbox is per user, and a session has none');
  }
  const given = (value === true ? {} : value) as Record<string, unknown>;
  const resolved = { ...defaultUserInbox };
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(USER_INBOX_BOUNDS, key))
      refuseUnknownKey('userInbox', key, USER_INBOX_BOUNDS);
    const option = given[key];
    if (option === undefined) continue;
    const [min, max, range] = USER_INBOX_BOUNDS[key as keyof UserInboxOptions];
    if (typeof option !== 'number') {
      throw new TypeError(`userInbox.${key} must be a number, not ${typeof option}`);
    }
    if (!Number.isInteger(option) || option < min || option > max) {
      throw new RangeError(`userInbox.${key} must be an integer from ${range}, not ${option}`);
    }
    resolved[key as keyof UserInboxOptions] = option;
  }
  return {
    retention: { maxLength: resolved.maxLength, maxAgeMs: resolved.maxAgeMs },
    holdMs: resolved.holdMs,
  };
}

export const defaultLimits: Required<GatewayLimits> = {
  maxMessageBytes: 1024 * 1024,
  maxBatch: 100,
  maxDepth: 64,
  maxJsonValues: 10_000,
  maxInFlight: 128,
  maxPendingCalls: 256,
  maxSubscriptions: 100,
  maxTopicNameBytes: 256,
  maxTopicBytesPerConnection: 16 * 1024,
  maxHistoryReadsPerConnection: 2,
  maxHistoryReads: 16,
  newTopicSubscribesPerSecond: 10,
  newTopicSubscribesBurst: 200,
  newTopicSubscribesPerSecondPerIp: 50,
  newTopicSubscribesBurstPerIp: 1_000,
  maxTopics: 100_000,
  maxConnections: 10_000,
  maxConnectionsPerIp: 100,
  // 10 × maxConnectionsPerIp's default: resolveLimits derives it from a given maxConnectionsPerIp.
  maxConnectionsPerIpv6Site: 1_000,
  maxConnectionsPerUser: 1_000,
  connectionsPerSecondPerIp: 20,
  connectionsBurstPerIp: 100,
  ratePerSecond: 1_000,
  rateBurst: 2_000,
  bytesPerSecond: 1024 * 1024,
  bytesPerSecondPerIp: 8 * 1024 * 1024,
  messageCostBytes: DEFAULT_MESSAGE_COST_BYTES,
  maxBufferedBytes: 4 * 1024 * 1024,
  maxBufferedBytesTotal: 512 * 1024 * 1024,
  endOfInputDeadlineMs: 30_000,
  maxHttpSockets: 2_000,
  maxHttpSocketsPerIp: 200,
  probeRequestsPerSecondPerIp: 20,
  probeRequestsBurstPerIp: 40,
  metricsCacheMs: 1_000,
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
  authenticateTimeoutMs: 10_000,
  sseReplayBytes: 1024 * 1024,
  sseReplayMs: 60_000,
  sseGraceMs: 30_000,
};

/** What each limit may be: an integer (or any number) in [min, max]. */
interface LimitRule {
  min: number;
  max: number;
  integer: boolean;
}

const MAX_INT = Number.MAX_SAFE_INTEGER;
const count = (min = 1): LimitRule => ({ min, max: MAX_INT, integer: true });
/** A timer's delay: Node's timers take at most 2^31 - 1 ms. */
const delay: LimitRule = { min: 1, max: 2 ** 31 - 1, integer: true };

/**
 * maxConnectionsPerIpv6Site's default, in `maxConnectionsPerIp`s: a /48 holds many /64s, so it
 * stays above whatever one address may hold.
 */
const IPV6_SITE_PER_IP = 10;

/** The one place each limit's range is stated; `resolveLimits` checks every option against it. */
export const limitRules: Record<keyof GatewayLimits, LimitRule> = {
  maxMessageBytes: count(),
  maxBatch: count(),
  // What comes in may go out (an echo): no deeper than MessagePack and CBOR encode safely.
  maxDepth: { min: 1, max: MAX_ENCODED_DEPTH, integer: true },
  maxJsonValues: count(),
  maxInFlight: count(),
  maxPendingCalls: count(),
  maxSubscriptions: count(0),
  maxTopicNameBytes: count(),
  maxTopicBytesPerConnection: count(),
  maxHistoryReadsPerConnection: count(),
  maxHistoryReads: count(),
  newTopicSubscribesPerSecond: { min: 0, max: MAX_INT, integer: false },
  newTopicSubscribesBurst: { min: 1, max: MAX_INT, integer: false },
  newTopicSubscribesPerSecondPerIp: { min: 0, max: MAX_INT, integer: false },
  newTopicSubscribesBurstPerIp: { min: 1, max: MAX_INT, integer: false },
  maxTopics: count(),
  maxConnections: count(),
  maxConnectionsPerIp: count(),
  maxConnectionsPerIpv6Site: count(),
  maxConnectionsPerUser: count(),
  connectionsPerSecondPerIp: { min: 0, max: MAX_INT, integer: false },
  connectionsBurstPerIp: { min: 1, max: MAX_INT, integer: false },
  ratePerSecond: { min: 0, max: MAX_INT, integer: false },
  rateBurst: { min: 1, max: MAX_INT, integer: false },
  bytesPerSecond: { min: 0, max: MAX_INT, integer: false },
  bytesPerSecondPerIp: { min: 0, max: MAX_INT, integer: false },
  messageCostBytes: count(0),
  maxBufferedBytes: count(0),
  maxBufferedBytesTotal: count(0),
  endOfInputDeadlineMs: delay,
  maxHttpSockets: count(),
  maxHttpSocketsPerIp: count(),
  probeRequestsPerSecondPerIp: { min: 0, max: MAX_INT, integer: false },
  probeRequestsBurstPerIp: { min: 1, max: MAX_INT, integer: false },
  metricsCacheMs: { min: 0, max: 2 ** 31 - 1, integer: true },
  headersTimeoutMs: delay,
  bodyTimeoutMs: delay,
  authenticateTimeoutMs: delay,
  sseReplayBytes: count(0),
  sseReplayMs: delay,
  sseGraceMs: delay,
};

/**
 * The gateway's limits: the defaults, overridden by `limits`, each checked against its rule.
 * Throws a TypeError naming an unknown limit or a value that is not a number, and a
 * RangeError naming a limit outside its range, so a typo fails at start-up, not under load.
 */
export function resolveLimits(limits: GatewayLimits = {}): Required<GatewayLimits> {
  const resolved: Required<GatewayLimits> = { ...defaultLimits };
  for (const [key, value] of Object.entries(limits) as [keyof GatewayLimits, unknown][]) {
    const rule = limitRules[key] as LimitRule | undefined;
    if (!rule) refuseUnknownKey('limits', key, limitRules);
    if (value === undefined) continue;
    if (typeof value !== 'number' || Number.isNaN(value)) {
      throw new TypeError(`limits.${key} must be a number, not ${describe(value)}`);
    }
    if (value < rule.min || value > rule.max || (rule.integer && !Number.isInteger(value))) {
      const what = rule.integer ? 'an integer' : 'a number';
      const range =
        rule.max === MAX_INT ? `at least ${rule.min}` : `from ${rule.min} to ${rule.max}`;
      throw new RangeError(`limits.${key} must be ${what} ${range}, not ${value}`);
    }
    resolved[key] = value;
  }
  if (limits.maxConnectionsPerIpv6Site === undefined) {
    resolved.maxConnectionsPerIpv6Site = Math.min(
      MAX_INT,
      IPV6_SITE_PER_IP * resolved.maxConnectionsPerIp,
    );
  }
  return resolved;
}

/** The routes' default paths (`rpc` defaults to the WebSocket `path`). */
export const defaultRoutes: Readonly<Record<Exclude<keyof GatewayRoutes, 'rpc'>, string | false>> =
  {
    livez: '/livez',
    readyz: '/readyz',
    metrics: '/metrics',
    openrpc: '/openrpc.json',
    events: false,
  };

/** Every route, resolved: a path, or false when turned off. */
export type ResolvedRoutes = { readonly [K in keyof GatewayRoutes]-?: string | false };

const ROUTE_NAMES: readonly (keyof GatewayRoutes)[] = [
  'livez',
  'readyz',
  'metrics',
  'openrpc',
  'rpc',
  'events',
];

/** Why `path` is not one a request line can carry and a route can be matched on, if it is not. */
function pathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'must start with "/"';
  // Matched against the request's path, the query string cut off.
  // eslint-disable-next-line no-control-regex -- control characters are what it looks for
  if (/[?#\s\u0000-\u001f\u007f]/.test(path))
    return 'must hold no "?", "#", spaces or control characters';
  return undefined;
}

/**
 * Check `GatewayOptions.path` once, when the gateway is made: the default "/rpc", or a TypeError
 * or RangeError naming the option.
 */
export function resolvePath(path: unknown): string {
  if (path === undefined) return '/rpc';
  if (typeof path !== 'string') {
    throw new TypeError(`path must be a string such as "/rpc", not ${describe(path)}`);
  }
  const problem = pathProblem(path);
  if (problem) throw new RangeError(`path ${problem}, not ${describe(path)}`);
  return path;
}

/**
 * Check `GatewayOptions.routes` once, when the gateway is made, and fill in the defaults:
 * `metrics: false` turns the metrics route off too. Throws a TypeError naming an unknown route
 * or a value that is neither a string nor false, and a RangeError naming a route whose path is
 * not one, or is already another route's (only `rpc` may share the WebSocket `path`).
 */
export function resolveRoutes(
  routes: unknown,
  path: string,
  metrics: boolean | undefined = true,
): ResolvedRoutes {
  if (routes !== undefined && !isRecord(routes)) {
    throw new TypeError(
      `routes must be an object such as { livez: '/livez', metrics: false }, not ${describe(routes)}`,
    );
  }
  const given = (routes ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(ROUTE_NAMES as readonly string[]).includes(key)) {
      throw new TypeError(
        `routes.${cut(key)} is not a route of the gateway (${ROUTE_NAMES.join(', ')})`,
      );
    }
  }
  const resolved: Record<keyof GatewayRoutes, string | false> = {
    ...defaultRoutes,
    rpc: path,
  };
  for (const name of ROUTE_NAMES) {
    const value = given[name];
    if (value === undefined) continue;
    if (value !== false && typeof value !== 'string') {
      throw new TypeError(
        `routes.${name} must be a path such as "/${name}", or false, not ${describe(value)}`,
      );
    }
    if (typeof value === 'string') {
      const problem = pathProblem(value);
      if (problem) throw new RangeError(`routes.${name} ${problem}, not ${describe(value)}`);
    }
    resolved[name] = value;
  }
  if (metrics === false) resolved.metrics = false;
  const taken = new Map<string, string>([[path, 'the WebSocket path (path)']]);
  for (const name of ROUTE_NAMES) {
    const route = resolved[name];
    if (route === false || (name === 'rpc' && route === path)) continue;
    const other = taken.get(route);
    if (other !== undefined) {
      throw new RangeError(
        `routes.${name} ${describe(route)} is already ${other}: each route needs a path of its own${name === 'rpc' ? '' : ' (only routes.rpc may share the WebSocket path)'}`,
      );
    }
    taken.set(route, `routes.${name}`);
  }
  return resolved;
}

/** The subprotocol the gateway prefers to answer with. */
export const PREFERRED_SUBPROTOCOL = 'jsonrpc-2.0';
