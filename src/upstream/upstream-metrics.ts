import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { UpstreamObserver, UpstreamOutcome } from './upstream-endpoint.js';

const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/**
 * Upstream requests on the gateway's registry, labelled by upstream (a name from the
 * configuration, so the series stay few): `wsrpc_upstream_requests_total{upstream,outcome}`,
 * `wsrpc_upstream_request_duration_seconds{upstream}`, `wsrpc_upstream_in_flight{upstream}`.
 * One per registry: routes installed twice on one gateway share it.
 */
class UpstreamMetrics implements UpstreamObserver {
  private readonly requests: Counter<'upstream' | 'outcome'>;
  private readonly duration: Histogram<'upstream'>;
  private readonly inFlight: Gauge<'upstream'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'wsrpc_upstream_requests_total',
      help: 'Calls to upstreams by upstream and outcome (ok, error, unavailable, timeout, busy, cancelled).',
      labelNames: ['upstream', 'outcome'],
      registers,
    });
    this.duration = new Histogram({
      name: 'wsrpc_upstream_request_duration_seconds',
      help: 'Time from a call to an upstream to its answer, retries included, by upstream.',
      labelNames: ['upstream'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.inFlight = new Gauge({
      name: 'wsrpc_upstream_in_flight',
      help: 'Calls to an upstream in flight, by upstream.',
      labelNames: ['upstream'],
      registers,
    });
  }

  started(upstream: string): void {
    this.inFlight.inc({ upstream });
  }

  settled(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    this.requests.inc({ upstream, outcome });
    if (outcome === 'busy') return; // refused before it started: no latency, never in flight
    this.inFlight.dec({ upstream });
    this.duration.observe({ upstream }, seconds);
  }
}

const byRegistry = new WeakMap<Registry, UpstreamMetrics>();

export function upstreamMetrics(registry: Registry): UpstreamObserver {
  let metrics = byRegistry.get(registry);
  if (!metrics) {
    metrics = new UpstreamMetrics(registry);
    byRegistry.set(registry, metrics);
  }
  return metrics;
}
