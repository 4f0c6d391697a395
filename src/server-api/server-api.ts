// The server API for backends: JSON-RPC 2.0 over HTTP POST, on a listener of its own or a path
// on the gateway's server, authenticated (API keys, JWT) and never open; the same methods taken
// from a Redis stream or a NATS subject when `consume` is set.
import { createServer } from 'node:http';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AnsweringPeer } from '../peer/answering-peer.js';
import type { Logger } from '../peer/logger.js';
import { peerConfig } from '../peer/peer.js';
import type { PeerConfig } from '../peer/peer.js';
import type { Gateway } from '../server/gateway.js';
import { SocketGate } from '../server/admission.js';
import type { SocketCut } from '../server/admission.js';
import { joinServer, pathOf } from '../server/http-dispatch.js';
import { closeUnread } from '../server/http-routes.js';
import { INVALID_UTF8_REPLY, strictUtf8 } from '../protocol/invalid-utf8.js';
import { readBodyBytes } from '../server/read-body.js';
import { RefusalLog } from '../server/upgrade-rejection.js';
import { apiAuthentication } from './auth.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConfig, ServerApiListen } from './config.js';
import { busyReply, failureReply } from './busy-reply.js';
import type { ErrorObject } from '../protocol/types.js';
import { startConsumer } from './consume.js';
import type { Consumer } from './consume.js';
import { consumerFigures } from './consumer-metrics.js';
import { apiMethods } from './methods.js';
import { NodeRequests } from './node-requests.js';
import type { Tracing } from '../tracing/tracing.js';
import { HttpExchangeTransport } from '../server/http-exchange-transport.js';

const JSON_TYPES = new Set(['application/json', 'application/json-rpc', 'application/jsonrequest']);

export interface ServerApiDeps {
  logger: Logger;
  tracing: Tracing;
  /** The gateway's HTTP server, for `config.path`. */
  server?: HttpServer;
  /** Where `consume` connects when it names no `url` (the broker's Redis or NATS URL). */
  brokerUrl?: string;
}

/** The broker consumer's state (`consume`), as `wsrpc_server_api_consumer_up` shows it too. */
export interface ServerApiConsumerStatus {
  readonly kind: 'redis' | 'nats';
  /**
   * It reads its broker now: Redis, its last read of the stream worked; NATS, it is connected
   * with its subscription. False while it cannot (the broker unreachable) and once closed.
   * While false (and before the consumer first reads), the gateway's /readyz answers 503
   * `server-api-consumer-unavailable`, until the server API is closed.
   */
  readonly up: boolean;
}

export interface ServerApi {
  /** The listener's URL (`http://host:port/`), or the path's on the gateway's server (undefined). */
  readonly url: string | undefined;
  /** The broker consumer's state now; undefined without `consume`. */
  readonly consumer: ServerApiConsumerStatus | undefined;
  /**
   * Answer one JSON-RPC request text as an authenticated backend (what the HTTP endpoint and the
   * consumers do): the reply text, or undefined for a notification.
   */
  answer(text: string, caller: ApiCaller): Promise<string | undefined>;
  /**
   * Stop taking requests from the broker (`consume`): on a node about to drain, other nodes take
   * them. It stops reading at once; the promise settles once the requests it took are answered.
   * The HTTP endpoint goes on serving until `close`.
   */
  stopConsuming(): Promise<void>;
  /**
   * Stop serving: new requests get 503, those in progress are waited for, at most `deadlineMs`
   * when given; any still unanswered then gets 503 `Server API closed` (with `Retry-After`) and
   * its connection is closed.
   */
  close(options?: { deadlineMs?: number }): Promise<void>;
}

function send(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return;
  const json = body.startsWith('{') || body.startsWith('[');
  res.writeHead(status, {
    'content-type': json ? 'application/json; charset=utf-8' : 'text/plain; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(body);
}

/**
 * A refusal sent before the body was read: the connection closes after it, so a body that goes
 * on (however slowly, however long) holds no socket open; Node would otherwise read all of it to
 * keep the connection alive.
 */
function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  closeUnread(req, res);
  send(res, status, body, headers);
}

/** What stops a listener (and its socket bounds). */
/** Whether `promise` settles within `ms`. */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  return Promise.race([promise.then(() => true), late]).finally(() => clearTimeout(timer));
}

/** Stop listening; resolves once every connection has closed. `cut` closes those left at once. */
interface Stop {
  (): Promise<void>;
  cut(): void;
}

/**
 * The server API's own HTTP listener, its sockets bounded as the gateway bounds its port's: per
 * address and in total before a byte is read, the first headers within `headersTimeoutMs`, a
 * whole request within `headersTimeoutMs + bodyTimeoutMs`. No trusted proxies here: every
 * address counts against `maxHttpSocketsPerIp`. Resolves once it listens.
 */
async function listenOwn(
  listen: ServerApiListen,
  bodyTimeoutMs: number,
  handle: (req: IncomingMessage, res: ServerResponse) => void,
  logger: Logger,
): Promise<{ server: HttpServer; stop: Stop }> {
  const refusals = new RefusalLog(logger);
  const gate = new SocketGate(listen, undefined, (reason: SocketCut, remoteAddress) =>
    refusals.refused({ reason, remoteAddress }, 'http socket closed'),
  );
  // Node checks its headers and request timeouts this often (default 30 s).
  const server = createServer(
    { connectionsCheckingInterval: Math.min(1_000, listen.headersTimeoutMs) },
    (req, res) => {
      gate.headersRead(req.socket);
      handle(req, res);
    },
  );
  server.headersTimeout = listen.headersTimeoutMs;
  server.requestTimeout = listen.headersTimeoutMs + bodyTimeoutMs;
  const unwatch = gate.watch(server);
  const stop: Stop = Object.assign(
    () =>
      new Promise<void>((resolve) => {
        unwatch();
        refusals.flush();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
    { cut: () => server.closeAllConnections() },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch((err: unknown) => {
    unwatch();
    throw err;
  });
  return { server, stop };
}

/**
 * Start the server API for `gateway`. Refuses (rejects) a configuration with no credentials
 * (resolveServerApiConfig does), a `path` without `deps.server`, a path another listener on
 * that server answers already, and a port it cannot listen on.
 */
export async function startServerApi(
  gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any application context
  config: ServerApiConfig,
  deps: ServerApiDeps,
): Promise<ServerApi> {
  if (config.keys.length === 0 && !config.jwt) {
    throw new TypeError('serverApi needs keys or jwt: the server API is never open');
  }
  if (config.path !== undefined && !deps.server) {
    throw new TypeError("serverApi.path needs the gateway's HTTP server (deps.server)");
  }
  const readiness: ConsumerReadiness = { consumer: undefined, release: undefined };
  readiness.release = holdReadiness(gateway, config, () => readiness.consumer?.up ?? false);
  try {
    return await openServerApi(gateway, config, deps, readiness);
  } catch (err) {
    readiness.release?.();
    throw err;
  }
}

/**
 * A node whose server API takes its calls from a broker (`consume`) is not ready (/readyz 503)
 * until the consumer first reads, nor while it cannot: a load balancer or Kubernetes takes the
 * node out, and brings it back once the consumer reads again. Held from the start of
 * startServerApi until the server API closes, or fails to start.
 */
interface ConsumerReadiness {
  /** The consumer, once started. */
  consumer: Consumer | undefined;
  /** Lets readiness go; undefined with no consumer, or `consume.readiness: false`. */
  release: (() => void) | undefined;
}

/**
 * Hold `gateway`'s /readyz at 503 `server-api-consumer-unavailable` while `up()` is false, for
 * a server API configured to consume with `consume.readiness` on; the function returned lets
 * go. Undefined when readiness does not follow the consumer. Also what holds readiness before
 * startServerApi is called (the standalone server's listeners open first).
 */
export function holdReadiness(
  gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any application context
  config: ServerApiConfig,
  up: () => boolean,
): (() => void) | undefined {
  if (!config.consume?.readiness) return undefined;
  return gateway.addReadinessCondition(() =>
    up() ? undefined : 'server-api-consumer-unavailable',
  );
}

async function openServerApi(
  gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any application context
  config: ServerApiConfig,
  deps: ServerApiDeps,
  readiness: ConsumerReadiness,
): Promise<ServerApi> {
  const logger = deps.logger.child({ component: 'server-api' });
  const authenticate = await apiAuthentication(config.keys, config.jwt);
  const nodes = new NodeRequests(gateway, {
    maxPending: config.maxPendingCalls,
    maxPendingPerCaller: config.maxPendingCallsPerCaller,
    windowMs: config.countWindowMs,
    logger,
  });
  await nodes.start();
  const { limits, protocol } = gateway.config;
  const peers: PeerConfig<ApiCaller> = peerConfig({
    registry: apiMethods({ gateway, config, nodes, logger, tracing: deps.tracing }),
    exposeErrorDetails: protocol.exposeErrorDetails,
    parse: {
      maxBatch: limits.maxBatch,
      maxDepth: limits.maxDepth,
      maxJsonValues: limits.maxJsonValues,
    },
  });
  const answer = (text: string, caller: ApiCaller): Promise<string | undefined> =>
    new AnsweringPeer<ApiCaller>(
      new HttpExchangeTransport(),
      { session: caller, logger },
      peers,
    ).answerText(text);

  const busy = (text: string): string => busyReply(text, peers.parse);
  const failure = (text: string, error: ErrorObject): string =>
    failureReply(text, peers.parse, error);

  let closing = false;
  const inFlight = new Set<Promise<void>>();
  /** The responses of the requests in progress: what a close past its deadline answers. */
  const responses = new Set<ServerResponse>();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const work = exchange(req, res).catch((err: unknown) => {
      logger.error({ err }, 'server API request failed');
      closeUnread(req, res);
      if (!res.headersSent) send(res, 500, 'Internal server error\n');
      else res.destroy();
    });
    inFlight.add(work);
    responses.add(res);
    void work.finally(() => {
      inFlight.delete(work);
      responses.delete(res);
    });
  };
  const exchange = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (closing) return refuse(req, res, 503, 'Server API closing\n', { 'retry-after': '1' });
    if (req.method !== 'POST') {
      return refuse(req, res, 405, 'POST a JSON-RPC request\n', { allow: 'POST' });
    }
    const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
    if (!JSON_TYPES.has(type)) {
      return refuse(req, res, 415, 'POST a JSON-RPC request with Content-Type: application/json\n');
    }
    const caller = await authenticate(req.headers);
    if (!caller) {
      const text = 'A valid API key or token is required (Authorization: Bearer ...)\n';
      return refuse(req, res, 401, text, { 'www-authenticate': 'Bearer' });
    }
    const bytes = await readBodyBytes(req, res, {
      maxBytes: config.maxBodyBytes,
      timeoutMs: config.bodyTimeoutMs,
    });
    if (bytes === undefined) return;
    const body = strictUtf8(bytes);
    // Not JSON text at all: answered as a syntax error is, 200 under id null.
    if (body === undefined) return send(res, 200, INVALID_UTF8_REPLY);
    const reply = await answer(body, caller);
    // Answered 503 already when a close's deadline passed while this request was handled.
    if (res.headersSent) return;
    if (reply === undefined) res.writeHead(204, { 'cache-control': 'no-store' }).end();
    else send(res, 200, reply);
  };

  let url: string | undefined;
  let stopHttp: Stop;
  if (config.listen) {
    const { server, stop } = await listenOwn(
      config.listen,
      config.bodyTimeoutMs,
      handle,
      logger,
    ).catch(async (err: unknown) => {
      await nodes.close();
      throw err;
    });
    const address = server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    url = `http://${host}:${address.port}/`;
    logger.info({ host: address.address, port: address.port }, 'server API listening');
    stopHttp = stop;
  } else {
    const path = config.path!;
    let leave: () => void;
    try {
      leave = joinServer(deps.server!, {
        ownsServer: false,
        paths: new Map([[path, 'serverApi.path']]),
        route: (req) => (pathOf(req.url) === path ? 'rpc' : undefined),
        serve: (req, res) => handle(req, res),
        takesUpgrade: () => false,
        upgrade: () => undefined,
        headersRead: () => undefined,
        other: () => Promise.resolve(false),
        refuseUpgrade: () => undefined,
      });
    } catch (err) {
      await nodes.close();
      throw err;
    }
    logger.info({ path }, "server API on the gateway's port");
    // The gateway's server keeps its connections: a request cut is answered and closed alone.
    stopHttp = Object.assign(
      () => {
        leave();
        return Promise.resolve();
      },
      { cut: () => undefined },
    );
  }

  const consumer = config.consume
    ? await startConsumer(
        config.consume,
        deps.brokerUrl,
        {
          answer,
          busy,
          failure,
          maxBytes: config.maxBodyBytes,
          figures: consumerFigures(gateway.metrics.registry, config.consume.kind),
        },
        logger,
      ).catch(async (err: unknown) => {
        await stopHttp();
        await nodes.close();
        throw err;
      })
    : undefined;
  readiness.consumer = consumer;

  let closed: Promise<void> | undefined;
  let consumerClosed: Promise<void> | undefined;
  // Never rejects: a shutdown goes on whatever the consumer's broker does.
  const stopConsuming = (): Promise<void> =>
    (consumerClosed ??= (consumer?.close() ?? Promise.resolve()).catch((err: unknown) => {
      logger.warn({ err }, 'server API: closing the consumer failed');
    }));
  /** Answer what is still in progress 503 and close its connection: the close's deadline passed. */
  const cutRequests = (): void => {
    logger.warn({ requests: responses.size }, 'server API closed with requests in progress: 503');
    for (const res of responses) {
      if (!res.headersSent) {
        send(res, 503, 'Server API closed\n', { 'retry-after': '1', connection: 'close' });
      } else {
        res.destroy();
      }
    }
    stopHttp.cut();
  };
  return {
    url,
    get consumer() {
      return consumer && config.consume && { kind: config.consume.kind, up: consumer.up };
    },
    answer,
    stopConsuming,
    close: (options = {}) =>
      (closed ??= (async () => {
        closing = true;
        try {
          // Stops reading at once; what it took and still runs is waited for with the rest.
          const consuming = stopConsuming();
          const stopped = stopHttp();
          const settled = Promise.allSettled([...inFlight, consuming]);
          if (options.deadlineMs === undefined) await settled;
          else if (!(await settledWithin(settled, options.deadlineMs))) cutRequests();
          await stopped;
          await nodes.close();
        } finally {
          // Closed on purpose: the node is as ready as one without a server API, once it is
          // closed. Not before: a node that closes it on its way down (the standalone server
          // closes it before draining) must not look ready to a load balancer meanwhile.
          readiness.release?.();
        }
      })()),
  };
}
