/**
 * One gateway node of the lifecycle cluster test, run as a child process (bundled by
 * bundleForNode, started by Cluster.node): sessions' user is the `user` query parameter, and
 * lifecycle events go between nodes with a short lease (LEASE_MS, default 1 500 ms).
 *
 * Environment: PORT (0: any free port; printed as `{"listening":port}`), LEASE_MS, and BROKER,
 * REDIS_URL, NATS_URL, BROKER_PREFIX as for `npm start`.
 */
import { brokerFromEnv, createGateway, createLogger } from '../../src/index.js';

const logger = createLogger();
const leaseMs = Number(process.env['LEASE_MS'] ?? 1_500);
const broker = await brokerFromEnv(process.env, logger);
const gateway = createGateway<{ user?: string }>({
  logger,
  broker,
  clusterEvents: { leaseMs, flushMs: 50 },
  authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
  userOf: (context) => context.user,
});
gateway.topic('room.*');
const address = await gateway.listen(Number(process.env['PORT'] ?? 0), '127.0.0.1');
console.log(JSON.stringify({ listening: address.port }));
