// (4) This gateway, imported as the built package (dist/src/index.js through the package's
// own "exports"), with its defaults: createGateway, gateway.method, gateway.topic,
// gateway.publish. Changed from the defaults, and only these:
// - the logger is quieted to "warn" (it logs one line per connect and disconnect at "info",
//   which would write 2,000 lines in the memory scenario);
// - the abuse limits are raised out of the way of one load generator on one IP
//   (bench/gateway-limits.mjs says which).
import { benchLimits } from '../gateway-limits.mjs';

const limits = benchLimits;

/**
 * This gateway as described above, with `options` added to its createGateway options and
 * `client` to its load-generator clients' settings (e.g. an encoding, deflate); `only` limits
 * it to one kind of scenario, or a list of kinds (see takesPart in scenarios.mjs);
 * `clientBaselineId` names the contestant with the same server driven by the bench's raw client
 * (the client CPU ratios are taken against it). With `countSubscribers`, the server counts the
 * live subscriptions to "bench" (`gateway.events$`) and `awaitSubscribers(n)` resolves once
 * there are n: for a client that does not tell when its subscribe was accepted.
 */
export function gatewayContestant({
  id,
  name,
  only,
  client = {},
  options = {},
  clientBaselineId,
  countSubscribers = false,
}) {
  return {
    id,
    name,
    ...(only && { only }),
    ...(clientBaselineId && { clientBaselineId }),
    client: {
      kind: 'jsonrpc',
      path: '/rpc',
      subscribe: { method: 'subscribe', params: ['bench'] },
      ...client,
    },
    async start(host) {
      const { createGateway } = await import('wsrpc-gateway');
      const { pino } = await import('pino');
      const gateway = createGateway({ logger: pino({ level: 'warn' }), limits, ...options });
      gateway.method('sum', ([a, b]) => a + b);
      gateway.topic('bench');
      const subscribers = countSubscribers ? subscriberCount(gateway, 'bench') : undefined;
      const { port } = await gateway.listen(0, host);
      let failure;
      return {
        port,
        ...(subscribers && { awaitSubscribers: subscribers.awaitCount }),
        publish(data) {
          gateway.publish('bench', data).catch((err) => (failure ??= err));
          if (failure) throw failure;
        },
        close: () => gateway.close({ timeoutMs: 1_000 }),
      };
    },
  };
}

/** The live subscriptions to `topic`, counted from the gateway's lifecycle events. */
function subscriberCount(gateway, topic) {
  let count = 0;
  let waiter;
  gateway.events$.subscribe((event) => {
    if (event.topic !== topic) return;
    if (event.type === 'subscribe') count++;
    else if (event.type === 'unsubscribe') count--;
    if (waiter && count >= waiter.n) waiter.resolve();
  });
  return {
    /** Resolves with the count once it reaches `n`; rejects after `timeoutMs`. */
    awaitCount(n, timeoutMs) {
      if (count >= n) return Promise.resolve(count);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`${count} of ${n} subscriptions live after ${timeoutMs} ms`));
        }, timeoutMs);
        waiter = {
          n,
          resolve: () => {
            clearTimeout(timer);
            waiter = undefined;
            resolve(count);
          },
        };
      });
    },
  };
}

export default gatewayContestant({ id: 'gateway', name: 'wsrpc-gateway (this)' });
