import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import perfHooks from 'node:perf_hooks';
import type { IntervalHistogram } from 'node:perf_hooks';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProbeBudget } from '../../src/server/http-dispatch.js';
import { EVENT_LOOP_SAMPLE_MS, GatewayMetrics } from '../../src/server/metrics.js';
import type { MetricsSources } from '../../src/server/metrics.js';
import { sampleValue } from '../support/metrics.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Sources whose subscription walk (what makes a render dear) counts the renders. */
function countingSources(): { sources: MetricsSources; renders: () => number } {
  let walks = 0;
  return {
    sources: {
      connections: () => ({ websocket: walks }),
      subscriptionsByTopic: () => ({}),
      subscriptionsByPattern: () => {
        walks++;
        return { news: walks };
      },
      dropped: () => 0,
      slowConsumerDisconnects: () => 0,
      methodLabel: (method) => method,
    },
    renders: () => walks,
  };
}

/** A clock moved by hand. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_764_633_600_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('GatewayMetrics.render', () => {
  it.each([0, 1_000])(
    'renders once for N scrapes that come while it runs (cacheMs %i)',
    async (cacheMs) => {
      const { sources, renders } = countingSources();
      const metrics = new GatewayMetrics(sources, { defaultMetrics: false, cacheMs });
      const texts = await Promise.all(Array.from({ length: 25 }, () => metrics.render()));
      expect(renders()).toBe(1);
      expect(new Set(texts).size).toBe(1);
      expect(texts[0]).toContain('rpc_subscriptions{topic="news"} 1');
    },
  );

  it('returns the same text without rendering within cacheMs, and renders again past it', async () => {
    const { sources, renders } = countingSources();
    const clock = manualClock();
    const metrics = new GatewayMetrics(sources, {
      defaultMetrics: false,
      cacheMs: 1_000,
      now: clock.now,
    });
    const first = await metrics.render();
    clock.advance(999);
    expect(await metrics.render()).toBe(first);
    expect(renders()).toBe(1);
    clock.advance(1);
    const second = await metrics.render();
    expect(renders()).toBe(2);
    expect(second).toContain('rpc_subscriptions{topic="news"} 2');
  });

  it('with cacheMs 0 renders each scrape that comes after the last render ended', async () => {
    const { sources, renders } = countingSources();
    const metrics = new GatewayMetrics(sources, { defaultMetrics: false, cacheMs: 0 });
    await metrics.render();
    await metrics.render();
    expect(renders()).toBe(2);
  });

  it('keeps no failed render: the next scrape renders again', async () => {
    const { sources, renders } = countingSources();
    let fail = true;
    const metrics = new GatewayMetrics(
      {
        ...sources,
        dropped: () => {
          if (fail) throw new Error('source down');
          return 0;
        },
      },
      { defaultMetrics: false, cacheMs: 60_000 },
    );
    const failed = await Promise.allSettled([metrics.render(), metrics.render()]);
    expect(failed.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await metrics.render()).toContain('rpc_dropped_messages_total 0');
    expect(renders()).toBe(2);
  });
});

/** GET `path` on 127.0.0.1:`port` from the loopback address `from` (Linux answers all of 127/8). */
function get(
  port: number,
  path: string,
  from: string,
): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, localAddress: from, agent: false },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode!, headers: response.headers, body }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('GET /metrics on a gateway', () => {
  it('N concurrent scrapes walk the subscriptions once (limits.metricsCacheMs)', async () => {
    const { gateway, port } = await res.gateway({ limits: { metricsCacheMs: 600_000 } });
    const walk = vi.spyOn(gateway.pubsub, 'subscriptionsByPattern');
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => get(port, '/metrics', '127.0.0.1')),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array<number>(20).fill(200));
    expect(walk).toHaveBeenCalledTimes(1);
    expect(new Set(answers.map((answer) => answer.body)).size).toBe(1);
  });
});

describe('limits.probeRequestsPerSecondPerIp', () => {
  it('answers 429 with Retry-After and Connection: close past an address budget; another address is served', async () => {
    const burst = 3;
    const { port } = await res.gateway({
      // A rate that refills nothing while the test runs: the burst is all there is.
      limits: {
        probeRequestsPerSecondPerIp: 0.001,
        probeRequestsBurstPerIp: burst,
        // The last scrape reads the refusals counted since the first.
        metricsCacheMs: 0,
      },
    });
    const paths = ['/livez', '/metrics', '/readyz'];
    for (const path of paths) expect((await get(port, path, '127.0.0.2')).status).toBe(200);
    for (const path of ['/metrics', '/livez', '/rpc']) {
      const refused = await get(port, path, '127.0.0.2');
      expect(refused.status).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(refused.headers.connection).toBe('close');
    }
    // Another address has its own budget.
    expect((await get(port, '/livez', '127.0.0.3')).status).toBe(200);
    const metrics = await get(port, '/metrics', '127.0.0.3');
    expect(metrics.status).toBe(200);
    expect(
      sampleValue(metrics.body, 'rpc_http_sockets_closed_total', { reason: 'probe-rate' }),
    ).toBe(3);
  });

  it('takes nothing from JSON-RPC over POST', async () => {
    const { port } = await res.demoGateway({
      limits: { probeRequestsPerSecondPerIp: 0.001, probeRequestsBurstPerIp: 1 },
    });
    expect((await get(port, '/livez', '127.0.0.4')).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'sum', params: [i, 1] }),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { result: number }).result).toBe(i + 1);
    }
  });
});

/** A request from `address`, as ProbeBudget reads it. */
const from = (address: string) => ({ socket: { remoteAddress: address } }) as IncomingMessage;

describe('ProbeBudget against a model', () => {
  // Rates of 1000/j per second (j a power of two) refill 1/j of a token a millisecond, exact in
  // floating point, so the model's arithmetic and the bucket's agree to the last bit.
  const rate = fc.constantFrom(125, 250, 500, 1_000);
  const step = fc.record({
    advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 })),
    group: fc.integer({ min: 0, max: 5 }),
  });

  /** The model: one bucket per group, kept forever, full at the start. */
  function modelOf(perSecond: number, burst: number) {
    const tokens = new Map<number, { tokens: number; at: number }>();
    const level = (group: number, now: number): number => {
      const kept = tokens.get(group);
      if (kept === undefined) return burst;
      return Math.min(burst, kept.tokens + ((now - kept.at) * perSecond) / 1000);
    };
    return {
      level,
      take(group: number, now: number): boolean {
        const left = level(group, now);
        const taken = left >= 1;
        tokens.set(group, { tokens: taken ? left - 1 : left, at: now });
        return taken;
      },
      /** Groups whose bucket is not full at `now`: the entries a table must keep. */
      notFull(now: number): number {
        let count = 0;
        for (const group of tokens.keys()) if (level(group, now) < burst) count++;
        return count;
      },
    };
  }

  it('with room for every group: refuses exactly what the model refuses, keeps exactly the buckets not full', () => {
    fc.assert(
      fc.property(
        rate,
        fc.integer({ min: 1, max: 6 }),
        fc.array(step, { maxLength: 200 }),
        (perSecond, burst, steps) => {
          const clock = manualClock();
          const budget = new ProbeBudget(
            {
              probeRequestsPerSecondPerIp: perSecond,
              probeRequestsBurstPerIp: burst,
              maxHttpSockets: 6,
            },
            undefined,
            clock.now,
          );
          const model = modelOf(perSecond, burst);
          for (const { advanceMs, group } of steps) {
            clock.advance(advanceMs);
            const retryAfter = budget.refuse(from(`10.0.0.${group}`));
            const taken = model.take(group, clock.now());
            expect(retryAfter === undefined).toBe(taken);
            if (retryAfter !== undefined) expect(retryAfter).toBe(1);
            expect(budget.size).toBe(model.notFull(clock.now()));
          }
        },
      ),
    );
  });

  it('with fewer entries than groups: never more entries, never lets an address through less often than the model', () => {
    fc.assert(
      fc.property(
        rate,
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(step, { maxLength: 200 }),
        (perSecond, burst, maxEntries, steps) => {
          const clock = manualClock();
          const budget = new ProbeBudget(
            {
              probeRequestsPerSecondPerIp: perSecond,
              probeRequestsBurstPerIp: burst,
              maxHttpSockets: maxEntries,
            },
            undefined,
            clock.now,
          );
          const model = modelOf(perSecond, burst);
          // By group: how many more requests the table let through than the model.
          const ahead = new Map<number, number>();
          for (const { advanceMs, group } of steps) {
            clock.advance(advanceMs);
            const refused = budget.refuse(from(`10.0.0.${group}`)) !== undefined;
            const lead =
              (ahead.get(group) ?? 0) +
              (refused ? 0 : 1) -
              (model.take(group, clock.now()) ? 1 : 0);
            // An entry given up for room, full or not, comes back full: the table may let an
            // address through where the model would not, and then refuse it where the model, which
            // refused earlier, would not; by every moment it has let it through as often or more.
            expect(lead).toBeGreaterThanOrEqual(0);
            ahead.set(group, lead);
            expect(budget.size).toBeLessThanOrEqual(maxEntries);
          }
        },
      ),
    );
  });

  it('IPv6 addresses of one /64 share a bucket; 0 turns the budget off', () => {
    const clock = manualClock();
    const limits = { probeRequestsBurstPerIp: 1, maxHttpSockets: 10 };
    const budget = new ProbeBudget(
      { ...limits, probeRequestsPerSecondPerIp: 1 },
      undefined,
      clock.now,
    );
    expect(budget.refuse(from('2001:db8:1:2::1'))).toBeUndefined();
    expect(budget.refuse(from('2001:db8:1:2::99'))).toBe(1);
    expect(budget.refuse(from('2001:db8:1:3::1'))).toBeUndefined();
    const off = new ProbeBudget(
      { ...limits, probeRequestsPerSecondPerIp: 0 },
      undefined,
      clock.now,
    );
    for (let i = 0; i < 10; i++) expect(off.refuse(from('10.0.0.1'))).toBeUndefined();
    expect(off.size).toBe(0);
  });
});

describe('GatewayMetrics: the default metrics', () => {
  it('sample the event-loop delay every EVENT_LOOP_SAMPLE_MS (100 ms), not every 10 ms, once per process, and still report its lag', async () => {
    // prom-client asks node:perf_hooks for the histogram when the default metrics are made: once
    // per process, so a fresh copy of the module (none made yet) is the one to watch.
    vi.resetModules();
    const fresh = await import('../../src/server/metrics.js');
    const monitor = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    const made = Array.from(
      { length: 3 },
      () => new fresh.GatewayMetrics(countingSources().sources, { cacheMs: 0 }),
    );
    expect(fresh.EVENT_LOOP_SAMPLE_MS).toBe(100);
    expect(monitor).toHaveBeenCalledTimes(1);
    expect(monitor).toHaveBeenCalledWith({ resolution: EVENT_LOOP_SAMPLE_MS });
    const histogram = monitor.mock.results[0]!.value as IntervalHistogram;
    histogram.disable();
    for (const metrics of made) {
      expect(await metrics.render()).toContain('nodejs_eventloop_lag_p99_seconds');
    }
    monitor.mockRestore();
  });
});
