import type { TransportKind } from '../transport/transport.js';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Logger } from '../peer/logger.js';
import type { Broker } from '../pubsub/broker.js';
import type { Params } from '../protocol/types.js';
import type { SubscriptionMethods } from './pubsub-service.js';
import type { Session } from './session.js';

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
  readonly remoteAddress: string | undefined;
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
  /** Deepest JSON nesting; deeper messages get -32007. Default 64. */
  maxDepth?: number;
  /** Incoming calls running at once per connection; beyond it -32000 Server busy. Default 128. */
  maxInFlight?: number;
  /** Server-to-client calls awaiting an answer per connection. Default 256. */
  maxPendingCalls?: number;
  /** Subscriptions (topics and streams) open at once per connection; beyond it -32005. Default 100. */
  maxSubscriptions?: number;
  /** Open connections in total; beyond it upgrades get 503. Default 10 000. */
  maxConnections?: number;
  /** Open connections from one IP address; beyond it upgrades get 429. Default 100. */
  maxConnectionsPerIp?: number;
  /** Incoming requests and notifications per second per connection (token bucket); beyond it -32003. 0 disables. Default 1 000. */
  ratePerSecond?: number;
  /** Bucket size: how many may arrive at once before the rate applies. Default 2 000. */
  rateBurst?: number;
}

export interface GatewayOptions<C> {
  /** WebSocket endpoint path. Default "/rpc". */
  path?: string;
  /** Bring your own HTTP(S) server; otherwise one is created. */
  server?: HttpServer;
  /**
   * Decide who may connect: return the session's context, or throw
   * `new UpgradeRejection(401)` (any 4xx/5xx) to refuse before the upgrade completes.
   */
  authenticate?: (request: UpgradeRequest) => C | Promise<C>;
  /**
   * Origins allowed to open a WebSocket (exact strings such as "https://app.example.com",
   * or a predicate); others get 403. Requests without an Origin header (non-browser
   * clients) are not affected. Default: any origin.
   */
  allowedOrigins?: readonly string[] | ((origin: string) => boolean);
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
   * Pick the subprotocol to answer with. Default: "jsonrpc-2.0" when offered, else the
   * first one offered (so a token sent as a second subprotocol is never echoed).
   */
  selectProtocol?: (offered: readonly string[], request: UpgradeRequest) => string | false;
  /**
   * Serve https:// and wss:// (and TLS on `listenTcp`) with this certificate and key (PEM).
   * `tlsFromEnv` reads them from TLS_CERT_FILE and TLS_KEY_FILE. Ignored with `server`.
   */
  tls?: TlsOptions;
  /** Handles plain HTTP requests the gateway does not serve itself; return false for 404. */
  httpHandler?: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;
  logger?: Logger;
  limits?: GatewayLimits;
  /** Default timeout of server-to-client calls in ms. Default 30 000. */
  callTimeout?: number;
  /** Ping every this many ms; a client that has not answered the previous ping is dropped. Default 30 000; 0 disables. */
  heartbeatInterval?: number;
  /** The user a session belongs to, from its context, so `gateway.notifyUser` can reach it on any node. */
  userOf?: (context: C) => string | undefined;
  /** Where topics live. Default: a MemoryBroker (one node, nothing else needed). */
  broker?: Broker;
  /** Names of the subscribe, notification and unsubscribe methods (e.g. eth_subscribe, eth_subscription, eth_unsubscribe). */
  subscriptionMethods?: Partial<SubscriptionMethods>;
  /** Serve Prometheus metrics at GET /metrics. Default true. */
  metrics?: boolean;
  /** Answer JSON-RPC 1.0 peers in their own shape. Default false. */
  acceptV1?: boolean;
  /** Put internal error messages and stacks in error.data (debug only). Default false. */
  exposeErrorDetails?: boolean;
}

export const defaultLimits: Required<GatewayLimits> = {
  maxMessageBytes: 1024 * 1024,
  maxBatch: 100,
  maxDepth: 64,
  maxInFlight: 128,
  maxPendingCalls: 256,
  maxSubscriptions: 100,
  maxConnections: 10_000,
  maxConnectionsPerIp: 100,
  ratePerSecond: 1_000,
  rateBurst: 2_000,
};

/** The subprotocol the gateway prefers to answer with. */
export const PREFERRED_SUBPROTOCOL = 'jsonrpc-2.0';
