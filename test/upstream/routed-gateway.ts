// A gateway whose methods are routed to upstreams, for the tests of test/upstream/.
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/tracing.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { installUpstreamRoutes, resolveUpstreamsConfig } from '../../src/upstream/index.js';
import type { UpstreamRoutes, UpstreamsConfig } from '../../src/upstream/index.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

/** A session's context in these tests: who `?user=` says connected. */
export interface TestContext {
  user: string;
  roles: string[];
}

export interface RoutedGateway extends RunningGateway<TestContext | undefined> {
  routes: UpstreamRoutes;
  close(): Promise<void>;
}

/**
 * A gateway on a free port whose `?user=NAME` connections have the context
 * `{ user: NAME, roles: ['buyer'] }` (none without it), with `config` (the file's `upstreams` and
 * `methods` sections) installed, as `resolve` reads them (by default as a configuration file's).
 */
export async function startRoutedGateway(
  config: unknown,
  options: GatewayOptions<TestContext | undefined> = {},
  resolve: (config: unknown) => UpstreamsConfig = resolveUpstreamsConfig,
): Promise<RoutedGateway> {
  const running = await startGateway<TestContext | undefined>({
    authenticate: (request) => {
      const user = request.query.get('user');
      return user === null ? undefined : { user, roles: ['buyer'] };
    },
    userOf: (context) => context?.user,
    ...options,
  });
  const routes = installUpstreamRoutes(running.gateway, resolve(config), {
    logger: silentLogger,
    tracing: noTracing,
  });
  return {
    ...running,
    routes,
    async close() {
      await running.gateway.close({ timeoutMs: 0 });
      await routes.close();
    },
  };
}
