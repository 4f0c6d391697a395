import { pino } from 'pino';
import { brokerFromEnv, createGateway, createLogger } from '../src/index.js';
import { shutdownOnSignals } from '../src/standalone/shutdown-signals.js';
import { demoIdentity } from './identity.js';
import { startTicker } from './pubsub.js';
import { demoPageHandler } from './static-files.js';
import { registerDemoService } from './service.js';
import { demoSettings } from './settings.js';
import type { DemoSettings } from './settings.js';

// The environment's settings, checked before anything starts (demo/settings.ts): a value that is
// not usable is one line on stderr naming its variable, and exit 1.
let settings: DemoSettings;
try {
  settings = demoSettings(process.env);
} catch (err) {
  process.stderr.write(`demo: ${(err as Error).message}\n`);
  process.exit(1);
}
// STDIO=1: serve one connection on stdin/stdout (newline-delimited JSON), so stdout is the
// protocol's and the log goes to stderr. The process ends when stdin does, once every call sent
// before the end is answered and the answers are written (within DRAIN_DEADLINE_MS).
// DRAIN_DEADLINE_MS: how long a shutdown (SIGTERM, SIGINT, SIGHUP; with STDIO=1 also the end of
// stdin) may take.
const { stdio, drainDeadlineMs, host, port, tcpPort, tls } = settings;
const logger = createLogger({ level: settings.logLevel }, stdio ? pino.destination(2) : undefined);

/**
 * Resolves once stdout has handed everything written to it to the OS ('finish' once ended, else
 * the callback of an empty write queued behind the rest), once it can write no more, or after
 * `timeoutMs` (with STDIO=1 the session's own deadline destroys it before that).
 */
function stdoutFlushed(timeoutMs: number): Promise<void> {
  const out = process.stdout;
  return new Promise((resolve) => {
    if (out.writableFinished || out.destroyed) return resolve();
    setTimeout(resolve, timeoutMs).unref();
    out.once('close', () => resolve());
    out.once('error', () => resolve());
    if (out.writableEnded) out.once('finish', () => resolve());
    else out.write('', () => resolve());
  });
}

try {
  // BROKER=memory (default) | redis | nats: several gateways on one broker share one topic space.
  const broker = await brokerFromEnv(process.env, logger);
  // The demo page (dist/demo-web, built by `npm run build`) is served on the gateway's own port.
  const page = demoPageHandler();
  if (page.missing.length > 0)
    logger.warn({ missing: page.missing }, 'demo page files missing: run `npm run build`');
  // The page's tokens live DEMO_TOKEN_TTL_MS (default 20 s) and are refreshed on the live connection.
  const identity = demoIdentity(settings.tokenTtlMs);
  const gateway = createGateway({
    logger,
    broker,
    ...identity.options,
    httpHandler: (req, res) => identity.tokenHandler(req, res) || page.handler(req, res),
    // TLS_CERT_FILE + TLS_KEY_FILE: https:// and wss:// (and TLS on TCP_PORT).
    tls,
    // TRUSTED_PROXIES=10.0.0.0/8,::1: reverse proxies whose X-Forwarded-For names the client,
    // for per-IP limits and logs. Unset: none is trusted.
    trustedProxies: [...settings.trustedProxies],
    // With STDIO=1 the end of stdin is the signal to stop: the same deadline as a drain.
    limits: stdio ? { endOfInputDeadlineMs: drainDeadlineMs } : {},
  });
  registerDemoService(gateway);
  identity.register(gateway);
  const stopTicker = startTicker(gateway, settings.tickMs);

  // The first SIGTERM, SIGINT or SIGHUP drains and exits 0; a second one exits 1 at once.
  const { stop } = shutdownOnSignals(logger, async () => {
    stopTicker();
    // Clients are told to reconnect elsewhere; in-flight calls finish; sessions close with 1012.
    await gateway.drain({ deadlineMs: drainDeadlineMs });
    await broker?.close();
    // process.exit drops what a pipe has not taken yet: with STDIO=1, the last answers.
    await stdoutFlushed(drainDeadlineMs);
  });

  if (stdio) {
    const session = await gateway.serveStream(process.stdin, process.stdout);
    void session.closed.then(() => stop('end of stdin'));
  } else {
    const address = await gateway.listen(port, host);
    const [http, ws] = tls ? ['https', 'wss'] : ['http', 'ws'];
    logger.info(`JSON-RPC over WebSocket at ${ws}://${address.address}:${address.port}/rpc`);
    logger.info(`JSON-RPC over HTTP POST at ${http}://${address.address}:${address.port}/rpc`);
    logger.info(`demo page at ${http}://${address.address}:${address.port}/`);
    if (tcpPort !== undefined) {
      const tcp = await gateway.listenTcp(tcpPort, host);
      logger.info(`JSON-RPC over ${tls ? 'TLS' : 'TCP'} (NDJSON) at ${tcp.address}:${tcp.port}`);
    }
  }
} catch (err) {
  logger.error({ err }, 'could not start the gateway');
  logger.flush();
  process.exit(1);
}
