/**
 * prom-client's default metrics (`process_*`, `nodejs_*`) are collected once per process, in a
 * registry of their own, and rendered into every gateway's /metrics. What they start (a GC
 * observer, an event-loop delay monitor) prom-client never stops: nothing of a gateway may be
 * reachable from them, or every gateway ever made would stay in memory, closed or not.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { createGateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { fullGc } from '../support/heap.js';
import { scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** `count` gateways, each listening, scraped once (its collect hooks run) and closed. */
async function closedGateways(
  count: number,
  options: GatewayOptions<unknown>,
): Promise<WeakRef<object>[]> {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < count; i++) {
    const gateway = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0, ...options });
    const { port } = await gateway.listen(0, '127.0.0.1');
    if (options.metrics !== false) await scrape(`http://127.0.0.1:${port}`);
    await gateway.close();
    refs.push(new WeakRef(gateway));
  }
  return refs;
}

/**
 * How many of `refs` are still alive once collections have had their chance, for up to 10 s: a
 * WeakRef's target is held to the end of the job that read it, and a socket still closing (its
 * last events not yet in, on a loaded machine) holds what it serves, so each round waits a
 * little before it collects. What something keeps for good stays alive through all of them.
 */
async function aliveAfterGc(refs: readonly WeakRef<object>[]): Promise<number> {
  const deadline = Date.now() + 10_000;
  let alive = refs.length;
  while (alive > 0 && Date.now() < deadline) {
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
    fullGc();
    alive = refs.filter((ref) => ref.deref() !== undefined).length;
  }
  return alive;
}

/** The names of the metrics a text declares (`# TYPE <name> ...`), in order. */
function declared(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]!);
}

describe('the default metrics, once per process', () => {
  it.each([
    ['metrics on (scraped)', {}],
    ['metrics: false', { metrics: false }],
  ])('closed gateways are collected: %s', async (_what, options) => {
    const refs = await closedGateways(20, options);
    expect(await aliveAfterGc(refs)).toBe(0);
  });

  it("two gateways in one process: each /metrics carries the process's metrics once, and its own registry none of them", async () => {
    const first = await res.gateway({ limits: { metricsCacheMs: 0 } });
    const second = await res.gateway({ limits: { metricsCacheMs: 0 } });
    for (const { gateway, httpUrl } of [first, second]) {
      const names = declared(await scrape(httpUrl));
      expect(names.filter((name) => name === 'process_cpu_user_seconds_total')).toHaveLength(1);
      expect(names.filter((name) => name === 'nodejs_eventloop_lag_p99_seconds')).toHaveLength(1);
      expect(names).toContain('rpc_connections');
      expect(new Set(names).size).toBe(names.length);
      expect(gateway.metrics.registry.getSingleMetric('process_cpu_user_seconds_total')).toBe(
        undefined,
      );
    }
  });
});
