import { brokerFromEnv, createGateway, createLogger } from '../src/index.js';
import { startTicker } from './pubsub.js';
import { demoPageHandler } from './static-files.js';
import { registerDemoService } from './service.js';

const logger = createLogger();
const port = Number(process.env['PORT'] ?? 8080);
const host = process.env['HOST'] ?? '127.0.0.1';

// BROKER=memory (default) | redis | nats: several gateways on one broker share one topic space.
const broker = await brokerFromEnv(process.env, logger);
// The demo page (dist/demo-web, built by `npm run build`) is served on the gateway's own port.
const page = demoPageHandler();
if (page.missing.length > 0)
  logger.warn({ missing: page.missing }, 'demo page files missing: run `npm run build`');
const gateway = createGateway({ logger, broker, httpHandler: page.handler });
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
  const address = await gateway.listen(port, host);
  logger.info(`JSON-RPC over WebSocket at ws://${address.address}:${address.port}/rpc`);
  logger.info(`demo page at http://${address.address}:${address.port}/`);
} catch (err) {
  logger.error({ err }, 'could not start the gateway');
  process.exit(1);
}
