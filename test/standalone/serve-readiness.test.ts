/**
 * A standalone server whose server API consumes calls from a broker is never seen ready before
 * that consumer reads: a readiness condition stands in for the server API's own from before the
 * listeners open until the server API has started (and holds /readyz at 503 itself), so no probe
 * finds the node ready in between, even in the turns `listenTcp` takes.
 */
import { nanoid } from 'nanoid';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Gateway } from '../../src/server/gateway.js';
import { serve } from '../../src/standalone/serve.js';
import type { StandaloneServer } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { httpGet } from '../support/network.js';
import { waitFor } from '../support/waiting.js';

const servers: StandaloneServer[] = [];
const prefixes: string[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(prefixes.splice(0).map((prefix) => deleteRedisKeys(REDIS_URL, prefix)));
});

describe('serve: readiness of a node with a server API consumer', () => {
  it('holds readiness from before any listener opens until the server API holds it, and is ready once the consumer reads', async () => {
    const prefix = `serve-ready-${nanoid(6)}`;
    prefixes.push(prefix);
    // The order in which the consumer's readiness condition and the listeners come.
    const order: string[] = [];
    for (const name of ['addReadinessCondition', 'listen', 'listenTcp'] as const) {
      // eslint-disable-next-line @typescript-eslint/unbound-method -- applied to its own gateway below
      const original = Gateway.prototype[name] as (...args: unknown[]) => unknown;
      vi.spyOn(Gateway.prototype, name).mockImplementation(function (
        this: Gateway<unknown>,
        ...args: unknown[]
      ) {
        order.push(name);
        return original.apply(this, args);
      } as never);
    }

    const config = resolveStandaloneConfig({
      listen: { host: '127.0.0.1', port: 0, tcpPort: 0 },
      broker: { kind: 'redis', url: REDIS_URL, prefix: `${prefix}:` },
      serverApi: {
        listen: { host: '127.0.0.1', port: 0 },
        keys: [nanoid(32)],
        consume: { redisStream: `${prefix}:api` },
      },
      shutdown: { drainDeadlineMs: 500 },
    });
    const server = await serve(config, { logger: pino({ level: 'silent' }) });
    servers.push(server);

    // The stand-in, the listeners, then the server API's own condition.
    expect(order).toEqual([
      'addReadinessCondition',
      'listen',
      'listenTcp',
      'addReadinessCondition',
    ]);
    const url = `http://127.0.0.1:${server.address.port}/readyz`;
    await waitFor(
      async () => (await httpGet(url)).status === 200,
      '/readyz 200 once the consumer reads',
    );
  });
});
