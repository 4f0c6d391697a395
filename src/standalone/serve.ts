// The standalone server: a gateway assembled from a resolved configuration file. The broker,
// the identity (jwtAuth, or the connect hook), declared topics, routes to upstreams, tracing,
// TLS from files, static files, the listeners, then the server API for backends; `close` drains.
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createSecureContext } from 'node:tls';
import type { SecureContextOptions, TlsOptions as TlsConnectionOptions } from 'node:tls';
import { resolve } from 'node:path';
import type { Logger } from '../peer/logger.js';
import { cut } from '../peer/option-rules.js';
import type { Broker } from '../pubsub/broker.js';
import { brokerFromEnv } from '../server/broker-from-env.js';
import { Gateway } from '../server/gateway.js';
import { createLogger } from '../server/logger.js';
import { holdReadiness, startServerApi } from '../server-api/server-api.js';
import type { ServerApi } from '../server-api/server-api.js';
import { loadTracing } from '../tracing/load-tracing.js';
import { installUpstreamRoutes } from '../upstream/install-routes.js';
import { upstreamHooks } from '../upstream-hooks/upstream-hooks.js';
import { resolveLimits } from '../server/options.js';
import type { GatewayOptions, TlsOptions } from '../server/options.js';
import type { ReplyLimits } from '../upstream/read-reply.js';
import type { BrokerConfig, TlsFilesConfig } from './sections.js';
import type { StandaloneConfig } from './standalone-config.js';
import { staticFilesHandler } from './static-files.js';

/**
 * What the server API's requests in progress get at a shutdown when the drain took its whole
 * deadline: a backend's publish made as its routed call ended still lands.
 */
export const SERVER_API_CLOSE_MIN_MS = 1_000;

export interface ServeOptions {
  /** Where the server logs. Default: pino at LOG_LEVEL on stdout. */
  logger?: Logger;
  /**
   * The folder relative file names (`static.dir`, `tls.*File`) are read from: the CLI gives the
   * configuration file's folder. Default: the working directory.
   */
  baseDir?: string;
}

/** A running standalone server. */
export interface StandaloneServer {
  readonly gateway: Gateway<unknown>;
  /** The WebSocket endpoint, e.g. ws://0.0.0.0:8080/rpc. */
  readonly url: string;
  readonly address: AddressInfo;
  /** The TCP listener's address, when `listen.tcpPort` is set. */
  readonly tcpAddress: AddressInfo | undefined;
  /** The server API's URL, when `serverApi` is set. */
  readonly serverApiUrl: string | undefined;
  /**
   * Drain (clients told to reconnect elsewhere, calls in flight finished, within
   * `shutdown.drainDeadlineMs`; the server API serving backends meanwhile, without taking
   * requests from the broker), close the server API (its requests in progress given what is left
   * of the deadline, at least SERVER_API_CLOSE_MIN_MS, then 503), then everything else the server
   * opened.
   */
  close(): Promise<void>;
}

/** Start the gateway `config` describes; rejects (having closed what it opened) if it cannot. */
export async function serve(
  config: StandaloneConfig,
  options: ServeOptions = {},
): Promise<StandaloneServer> {
  const logger = options.logger ?? createLogger();
  const fileOf = (name: string): string => resolve(options.baseDir ?? '.', name);
  // What the server opened besides the gateway, closed after it in reverse order.
  const closers: (() => Promise<void>)[] = [];
  const closeOthers = async (): Promise<void> => {
    for (const close of closers.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        logger.warn({ err }, 'error while closing');
      }
    }
  };
  let gateway: Gateway<unknown> | undefined;
  // The server API serves backends while the gateway drains (a routed call in flight may publish,
  // notify or call a client), and closes once the sessions are drained, its requests in progress
  // given what is left of the drain's deadline (at least SERVER_API_CLOSE_MIN_MS).
  let api: ServerApi | undefined;
  const apiClosed = async (deadlineMs: number): Promise<void> => {
    const open = api;
    api = undefined;
    await open?.close({ deadlineMs }).catch((err: unknown) => {
      logger.warn({ err }, 'error while closing');
    });
  };
  try {
    const tracing = await loadTracing(config.tracing);
    const broker = await openBroker(config.broker, logger);
    if (broker) closers.push(() => broker.close());
    const hooks =
      config.hooks &&
      upstreamHooks(config.hooks, { logger, tracing, replyLimits: hookReplyLimits(config) });
    if (hooks) closers.push(() => hooks.close());
    // Who may connect: jwtAuth, or the connect hook (never both: the config refuses it).
    const identity = hooks?.authenticate
      ? { authenticate: hooks.authenticate, userOf: hooks.userOf, identity: hooks.identity }
      : await identityOptions(config);
    gateway = new Gateway<unknown>({
      ...config.gateway,
      ...identity,
      identity: { ...config.gateway.identity, ...identity.identity },
      logger,
      broker,
      tls: config.tls && readTls(config.tls, fileOf),
      httpHandler:
        config.static && staticFilesHandler(fileOf(config.static.dir), config.static.dir),
    } as GatewayOptions<unknown>);
    hooks?.attach(gateway);
    for (const [pattern, topic] of Object.entries(config.topics)) {
      gateway.topic(pattern, {
        ...(hooks?.authorizeTopic && { authorize: hooks.authorizeTopic }),
        ...(topic.history && { history: topic.history }),
        ...(topic.slowConsumer && { slowConsumer: topic.slowConsumer }),
        ...(topic.highWaterMark !== undefined && { highWaterMark: topic.highWaterMark }),
        ...(topic.presence && { presence: topic.presence }),
      });
    }
    if (config.upstreams) {
      const routes = installUpstreamRoutes(gateway, config.upstreams, { logger, tracing });
      closers.push(() => routes.close());
      await routes.ready;
    }
    const { host, port, tcpPort } = config.listen;
    // A server API that consumes from a broker holds /readyz at 503 from its start until its
    // consumer reads. Until it has started, this condition stands in for it: the listeners open
    // at once (/livez answers while the consumer's broker is slow to reach), and the node is
    // never seen ready before its consumer reads.
    const apiStarting = config.serverApi && holdReadiness(gateway, config.serverApi, () => false);
    let address: AddressInfo;
    let tcpAddress: AddressInfo | undefined;
    let serverApiUrl: string | undefined;
    try {
      address = await gateway.listen(port, host);
      tcpAddress = tcpPort === undefined ? undefined : await gateway.listenTcp(tcpPort, host);
      if (config.serverApi) {
        api = await startServerApi(gateway, config.serverApi, {
          logger,
          tracing,
          server: gateway.httpServer,
          // consume.url's default: the broker's URL, when the consumer is of the broker's kind.
          brokerUrl:
            config.broker.kind === config.serverApi.consume?.kind ? config.broker.url : undefined,
        });
        serverApiUrl = api.url;
      }
    } finally {
      apiStarting?.();
    }
    const scheme = config.tls ? 'wss' : 'ws';
    const url = `${scheme}://${hostForUrl(address)}:${address.port}${gateway.config.http.path}`;
    const tcp = tcpAddress && `${tcpAddress.address}:${tcpAddress.port}`;
    logger.info({ url, tcp, serverApi: serverApiUrl }, 'serving');
    const running = gateway;
    let closed: Promise<void> | undefined;
    const close = async (): Promise<void> => {
      const { drainDeadlineMs } = config.shutdown;
      const deadline = Date.now() + drainDeadlineMs;
      const left = (): number => Math.max(SERVER_API_CLOSE_MIN_MS, deadline - Date.now());
      try {
        // Requests queued on the broker go to nodes that are not draining: it stops reading at
        // once; the requests it took and still runs are waited for by the server API's close,
        // within its deadline, not before the drain starts.
        void api?.stopConsuming();
        await running.drain({
          deadlineMs: drainDeadlineMs,
          beforeClose: () => apiClosed(left()),
        });
      } finally {
        await apiClosed(left());
        await closeOthers();
      }
    };
    return {
      gateway,
      url,
      address,
      tcpAddress,
      serverApiUrl,
      close: () => (closed ??= close()),
    };
  } catch (err) {
    await apiClosed(SERVER_API_CLOSE_MIN_MS);
    await gateway?.close().catch(() => undefined);
    await closeOthers();
    throw err;
  }
}

/** The broker of `broker:`, built by brokerFromEnv (undefined for memory: the gateway's own). */
/** A hook's reply is held to the depth and count of values a client's message is. */
function hookReplyLimits(config: StandaloneConfig): ReplyLimits {
  const { maxDepth, maxJsonValues } = resolveLimits(config.gateway.limits);
  return { maxDepth, maxJsonValues };
}

function openBroker(config: BrokerConfig, logger: Logger): Promise<Broker | undefined> {
  if (config.kind === 'memory') return Promise.resolve(undefined);
  const urlKey = config.kind === 'redis' ? 'REDIS_URL' : 'NATS_URL';
  return brokerFromEnv(
    {
      BROKER: config.kind,
      [urlKey]: config.url,
      BROKER_PREFIX: config.prefix,
      NATS_HISTORY_STORAGE: config.historyStorage,
    },
    logger,
  );
}

/** The identity hooks of `jwt` (jose is loaded only then). */
async function identityOptions(
  config: StandaloneConfig,
): Promise<Partial<GatewayOptions<unknown>>> {
  if (!config.jwt) return {};
  const { jwtAuth } = await import('../jwt.js');
  return jwtAuth(config.jwt) as unknown as Partial<GatewayOptions<unknown>>;
}

/**
 * The PEM text of `tls:`'s files, each tried as what it should be (createSecureContext), so a
 * file that is not PEM, a wrong passphrase or a key of another certificate is refused naming
 * the field, not by the TLS server as it starts ("PEM routines::no start line").
 */
/**
 * What `serve` would refuse in the configuration's TLS files (each problem naming its key), read
 * relative to `baseDir`: undefined when they are usable, or there are none. For check-config.
 */
export function tlsFileProblem(config: StandaloneConfig, baseDir: string): string | undefined {
  if (!config.tls) return undefined;
  try {
    readTls(config.tls, (name) => resolve(baseDir, name));
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

function readTls(files: TlsFilesConfig, fileOf: (name: string) => string): TlsOptions {
  const read = (key: keyof TlsFilesConfig, file: string): string => {
    try {
      return readFileSync(fileOf(file), 'utf8');
    } catch (err) {
      throw new Error(`tls.${key}: cannot read ${cut(file)}: ${cut((err as Error).message)}`, {
        cause: err,
      });
    }
  };
  const usable = (what: string, options: SecureContextOptions): void => {
    try {
      createSecureContext(options);
    } catch (err) {
      throw new Error(`${what}: ${cut((err as Error).message)}`, { cause: err });
    }
  };
  const tls: TlsOptions = {
    cert: read('certFile', files.certFile),
    key: read('keyFile', files.keyFile),
    ...(files.caFile !== undefined && { ca: read('caFile', files.caFile) }),
    ...(files.passphrase !== undefined && { passphrase: files.passphrase }),
  };
  const { certFile, keyFile, caFile } = files;
  if (tls.ca !== undefined) {
    const what = `tls.caFile: cannot use ${cut(caFile!)}`;
    // OpenSSL takes a file of no certificate at all as no authorities, silently.
    if (!String(tls.ca).includes('-----BEGIN CERTIFICATE-----')) {
      throw new Error(`${what}: it holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    }
    usable(what, { ca: tls.ca });
  }
  usable(`tls.certFile: cannot use ${cut(certFile)}`, { cert: tls.cert });
  usable(
    `tls.keyFile: cannot use ${cut(keyFile)}${tls.passphrase === undefined ? '' : ' (with tls.passphrase)'}`,
    {
      key: tls.key,
      passphrase: tls.passphrase,
    },
  );
  usable(`tls.keyFile: cannot use ${cut(keyFile)} with tls.certFile ${cut(certFile)}`, tls);
  return tls.ca === undefined ? tls : mutualTls(tls);
}

/**
 * `tls` asking every client for a certificate and refusing, in the handshake, one that presents
 * none or one no CA of `tls.ca` signed: what `tls.caFile` means. The gateway hands its `tls`
 * option to the https and TLS servers as it is.
 */
function mutualTls(tls: TlsOptions): TlsOptions {
  const mutual: TlsOptions & Pick<TlsConnectionOptions, 'requestCert' | 'rejectUnauthorized'> = {
    ...tls,
    requestCert: true,
    rejectUnauthorized: true,
  };
  return mutual;
}

function hostForUrl(address: AddressInfo): string {
  return address.family === 'IPv6' ? `[${address.address}]` : address.address;
}
