import { pino } from 'pino';
import { brokerFromEnv, createGateway, createLogger, tlsFromEnv } from '../src/index.js';
import { startTicker } from './pubsub.js';
import { demoPageHandler } from './static-files.js';
import { registerDemoService } from './service.js';

// STDIO=1: serve one connection on stdin/stdout (newline-delimited JSON), so stdout is the
// protocol's and the log goes to stderr. The process ends when stdin does.
const stdio = process.env['STDIO'] === '1';
const logger = createLogger({}, stdio ? pino.destination(2) : undefined);
const port = Number(process.env['PORT'] ?? 8080);
const host = process.env['HOST'] ?? '127.0.0.1';
const tcpPort = process.env['TCP_PORT'];

// BROKER=memory (default) | redis | nats: several gateways on one broker share one topic space.
const broker = await brokerFromEnv(process.env, logger);
// The demo page (dist/demo-web, built by `npm run build`) is served on the gateway's own port.
const page = demoPageHandler();
if (page.missing.length > 0)
  logger.warn({ missing: page.missing }, 'demo page files missing: run `npm run build`');
// TLS_CERT_FILE + TLS_KEY_FILE: https:// and wss:// (and TLS on TCP_PORT).
const tls = tlsFromEnv(process.env);
// TRUSTED_PROXIES=10.0.0.0/8,::1 (comma-separated addresses or subnets): reverse proxies whose
// X-Forwarded-For names the client, for per-IP limits and logs. Unset: none is trusted.
const trustedProxies = (process.env['TRUSTED_PROXIES'] ?? '')
  .split(',')
  .map((entry) => entry.trim())
  .filter((entry) => entry !== '');
const gateway = createGateway({ logger, broker, httpHandler: page.handler, tls, trustedProxies });
registerDemoService(gateway);
const stopTicker = startTicker(gateway, Number(process.env['TICK_MS'] ?? 500));

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) {
    logger.warn({ signal }, 'second signal: exiting now');
    process.exit(1);
  }
  stopping = true;
  logger.info({ signal }, 'shutting down');
  stopTicker();
  // Clients are told to reconnect elsewhere; in-flight calls finish; sessions close with 1012.
  await gateway.drain({ deadlineMs: Number(process.env['DRAIN_DEADLINE_MS'] ?? 10_000) });
  await broker?.close();
  logger.flush();
  process.exit(0);
}
process.on('SIGINT', (s) => void stop(s));
process.on('SIGTERM', (s) => void stop(s));

try {
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
      const tcp = await gateway.listenTcp(Number(tcpPort), host);
      logger.info(`JSON-RPC over ${tls ? 'TLS' : 'TCP'} (NDJSON) at ${tcp.address}:${tcp.port}`);
    }
  }
} catch (err) {
  logger.error({ err }, 'could not start the gateway');
  process.exit(1);
}
