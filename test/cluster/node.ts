/**
 * One gateway node of the cluster tests, run as a child process: support.ts bundles this file
 * (with the current src/) into a temporary directory and starts it with `node`.
 *
 * Environment: PORT (0: any free port; the chosen one is printed as `{"listening":port}`),
 * NODE_NAME, HISTORY (the `feed` topic's history maxLength), and BROKER, REDIS_URL, NATS_URL,
 * BROKER_PREFIX as for `npm start` (src/server/broker-from-env.ts).
 *
 * It serves the `feed` topic, `feed.publish` (publishes its params to `feed`, returns the seq),
 * `node.info` (which node answered) and `GET /info` (local `feed` subscribers, readiness).
 */
import { brokerFromEnv, createGateway, createLogger } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';

const logger = createLogger();
const name = process.env['NODE_NAME'] ?? 'node';
const history = Number(process.env['HISTORY'] ?? 1_000);

function info(gateway: Gateway): Record<string, unknown> {
  return {
    name,
    pid: process.pid,
    subscribers: gateway.pubsub.topics()['feed'] ?? 0,
    ready: gateway.isReady,
    brokerReady: gateway.broker.ready,
  };
}

const broker = await brokerFromEnv(process.env, logger);
const gateway: Gateway = createGateway({
  logger,
  broker,
  // Errors of feed.publish carry the broker's message in error.data (the tests read it).
  exposeErrorDetails: true,
  httpHandler: (req, res) => {
    if ((req.url ?? '/').split('?', 1)[0] !== '/info') return false;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(info(gateway)));
    return true;
  },
});
gateway.topic('feed', { history: { maxLength: history } });
gateway.method('feed.publish', (params) => gateway.publish('feed', params));
gateway.method('node.info', () => info(gateway));

process.on('SIGTERM', () => {
  void gateway
    .close({ timeoutMs: 1_000 })
    .then(() => broker?.close())
    .finally(() => process.exit(0));
});

const address = await gateway.listen(Number(process.env['PORT'] ?? 0), '127.0.0.1');
process.stdout.write(`${JSON.stringify({ listening: address.port })}\n`);
