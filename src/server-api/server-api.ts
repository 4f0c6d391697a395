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
import { joinServer, pathOf } from '../server/http-dispatch.js';
import { readBody } from '../server/read-body.js';
import { apiAuthentication } from './auth.js';
import type { ApiCaller } from './auth.js';
import type { ServerApiConfig } from './config.js';
import { busyReply } from './busy-reply.js';
import { startConsumer } from './consume.js';
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

export interface ServerApi {
  /** The listener's URL (`http://host:port/`), or the path's on the gateway's server (undefined). */
  readonly url: string | undefined;
  /**
   * Answer one JSON-RPC request text as an authenticated backend (what the HTTP endpoint and the
   * consumers do): the reply text, or undefined for a notification.
   */
  answer(text: string, caller: ApiCaller): Promise<string | undefined>;
  close(): Promise<void>;
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
  const logger = deps.logger.child({ component: 'server-api' });
  const authenticate = await apiAuthentication(config.keys, config.jwt);
  const nodes = new NodeRequests(gateway, {
    maxPending: config.maxPendingCalls,
    windowMs: config.countWindowMs,
    logger,
  });
  await nodes.start();
  const { limits, protocol } = gateway.config;
  const peers: PeerConfig<ApiCaller> = peerConfig({
    registry: apiMethods({ gateway, config, nodes, logger, tracing: deps.tracing }),
    exposeErrorDetails: protocol.exposeErrorDetails,
    parse: { maxBatch: limits.maxBatch, maxDepth: limits.maxDepth },
  });
  const answer = (text: string, caller: ApiCaller): Promise<string | undefined> =>
    new AnsweringPeer<ApiCaller>(
      new HttpExchangeTransport(),
      { session: caller, logger },
      peers,
    ).answer(text);

  const busy = (text: string): string => busyReply(text, peers.parse);

  let closing = false;
  const inFlight = new Set<Promise<void>>();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const work = exchange(req, res).catch((err: unknown) => {
      logger.error({ err }, 'server API request failed');
      if (!res.headersSent) send(res, 500, 'Internal server error\n');
      else res.destroy();
    });
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };
  const exchange = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (closing) return send(res, 503, 'Server API closing\n', { 'retry-after': '1' });
    if (req.method !== 'POST')
      return send(res, 405, 'POST a JSON-RPC request\n', { allow: 'POST' });
    const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
    if (!JSON_TYPES.has(type)) {
      return send(res, 415, 'POST a JSON-RPC request with Content-Type: application/json\n');
    }
    const caller = await authenticate(req.headers);
    if (!caller) {
      req.resume();
      return send(res, 401, 'A valid API key or token is required (Authorization: Bearer ...)\n', {
        'www-authenticate': 'Bearer',
      });
    }
    const body = await readBody(req, res, {
      maxBytes: config.maxBodyBytes,
      timeoutMs: config.bodyTimeoutMs,
    });
    if (body === undefined) return;
    const reply = await answer(body, caller);
    if (reply === undefined) res.writeHead(204, { 'cache-control': 'no-store' }).end();
    else send(res, 200, reply);
  };

  let url: string | undefined;
  let stopHttp: () => Promise<void>;
  if (config.listen) {
    const server = createServer(handle);
    server.headersTimeout = Math.min(config.bodyTimeoutMs, 60_000);
    server.requestTimeout = config.bodyTimeoutMs + config.maxCallTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.listen!.port, config.listen!.host, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch(async (err: unknown) => {
      await nodes.close();
      throw err;
    });
    const address = server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    url = `http://${host}:${address.port}/`;
    logger.info({ host: address.address, port: address.port }, 'server API listening');
    stopHttp = () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
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
    stopHttp = () => {
      leave();
      return Promise.resolve();
    };
  }

  const consumer = config.consume
    ? await startConsumer(
        config.consume,
        deps.brokerUrl,
        { answer, busy, maxBytes: config.maxBodyBytes },
        logger,
      ).catch(async (err: unknown) => {
        await stopHttp();
        await nodes.close();
        throw err;
      })
    : undefined;

  let closed: Promise<void> | undefined;
  return {
    url,
    answer,
    close: () =>
      (closed ??= (async () => {
        closing = true;
        await consumer?.close();
        await stopHttp();
        await Promise.allSettled([...inFlight]);
        await nodes.close();
      })()),
  };
}
