import { pino } from 'pino';
import { createGateway } from '../src/index.js';
import type { Logger } from '../src/index.js';
import { registerDemoPubSub } from './pubsub.js';
import { registerDemoService } from './service.js';

const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'info' }) as Logger;
const port = Number(process.env['PORT'] ?? 8080);
const host = process.env['HOST'] ?? '127.0.0.1';

const gateway = createGateway({ logger });
registerDemoService(gateway);
const stopTicker = registerDemoPubSub(gateway);

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) {
    logger.warn({ signal }, 'second signal: exiting now');
    process.exit(1);
  }
  stopping = true;
  logger.info({ signal }, 'shutting down');
  stopTicker();
  await gateway.close();
  process.exit(0);
}
process.on('SIGINT', (s) => void stop(s));
process.on('SIGTERM', (s) => void stop(s));

try {
  const address = await gateway.listen(port, host);
  logger.info(`JSON-RPC over WebSocket at ws://${address.address}:${address.port}/rpc`);
} catch (err) {
  logger.error({ err }, 'could not start the gateway');
  process.exit(1);
}
