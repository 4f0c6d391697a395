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
 *
 * For the chaos suite (test/chaos): TOPICS (`name:history,...`) declares more topics, each with
 * its history maxLength; `topic.publish` ([topic, data]) publishes to any declared topic and
 * returns the seq; `GET /info` also gives local subscribers by topic (`topics`); `POST /drain`
 * drains the gateway (rpc.reconnect to every client, sessions closed once idle) and exits.
 *
 * For presence (test/cluster/presence-cluster.test.ts): PRESENCE declares that topic pattern
 * with `presence: true`, PRESENCE_LEASE_MS sets presenceLeaseMs (and presenceCoalesceMs a
 * sixth of it, so a short lease gets its events as soon).
 */
import { brokerFromEnv, createGateway, createLogger } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { InvalidParamsError } from '../../src/protocol/index.js';

const logger = createLogger();
const name = process.env['NODE_NAME'] ?? 'node';
const history = Number(process.env['HISTORY'] ?? 1_000);
const topics = (process.env['TOPICS'] ?? '')
  .split(',')
  .filter((entry) => entry !== '')
  .map((entry) => {
    const [topic = '', maxLength = String(history)] = entry.split(':');
    return { topic, maxLength: Number(maxLength) };
  });

function info(gateway: Gateway): Record<string, unknown> {
  return {
    name,
    pid: process.pid,
    subscribers: gateway.pubsub.topics()['feed'] ?? 0,
    ready: gateway.isReady,
    brokerReady: gateway.broker.ready,
    topics: gateway.pubsub.topics(),
  };
}

const presenceTopic = process.env['PRESENCE'];
const presenceLeaseMs = Number(process.env['PRESENCE_LEASE_MS'] ?? 0);
const broker = await brokerFromEnv(process.env, logger);
const gateway: Gateway = createGateway({
  logger,
  broker,
  // Errors of feed.publish carry the broker's message in error.data (the tests read it).
  exposeErrorDetails: true,
  ...(presenceLeaseMs > 0
    ? {
        presenceLeaseMs,
        presenceCoalesceMs: Math.max(10, Math.round(presenceLeaseMs / 6)),
      }
    : {}),
  httpHandler: (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path === '/drain' && req.method === 'POST') {
      res.writeHead(202).end();
      void gateway
        .drain({ deadlineMs: 2_000 })
        .then(() => broker?.close())
        .finally(() => process.exit(0));
      return true;
    }
    if (path !== '/info') return false;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(info(gateway)));
    return true;
  },
});
gateway.topic('feed', { history: { maxLength: history } });
gateway.method('feed.publish', (params) => gateway.publish('feed', params));
gateway.method('node.info', () => info(gateway));
for (const { topic, maxLength } of topics) gateway.topic(topic, { history: { maxLength } });
if (presenceTopic) gateway.topic(presenceTopic, { presence: true });
gateway.method('topic.publish', (params) => {
  const [topic, data] = Array.isArray(params) ? params : [];
  if (typeof topic !== 'string') throw new InvalidParamsError('expected [topic, data]');
  return gateway.publish(topic, data);
});

process.on('SIGTERM', () => {
  void gateway
    .close({ timeoutMs: 1_000 })
    .then(() => broker?.close())
    .finally(() => process.exit(0));
});

const address = await gateway.listen(Number(process.env['PORT'] ?? 0), '127.0.0.1');
process.stdout.write(`${JSON.stringify({ listening: address.port })}\n`);
