import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { UpstreamObserver, UpstreamOutcome } from './upstream-endpoint.js';

const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

const OUTCOMES: readonly UpstreamOutcome[] = [
  'ok',
  'error',
  'unavailable',
  'timeout',
  'busy',
  'cancelled',
];

/** One upstream's figures between two scrapes: plain numbers, cheap to move on every call. */
interface UpstreamFigures {
  readonly labels: { readonly upstream: string };
  inFlight: number;
  /** A call to it has started: its in-flight series shows (a refused call starts none). */
  shown: boolean;
  /** Requests by outcome not yet added to the counter. */
  readonly unreported: Record<UpstreamOutcome, number>;
}

/**
 * Upstream requests on the gateway's registry, labelled by upstream (a name from the
 * configuration, so the series stay few): `wsrpc_upstream_requests_total{upstream,outcome}`,
 * `wsrpc_upstream_request_duration_seconds{upstream}`, `wsrpc_upstream_in_flight{upstream}`.
 * One per registry: routes installed twice on one gateway share it. The count and the gauge
 * are kept as plain numbers and handed to prom-client when the registry is read (`collect`):
 * prom-client works out a key from the labels on every update, several times per call.
 */
class UpstreamMetrics implements UpstreamObserver {
  private readonly requests: Counter<'upstream' | 'outcome'>;
  private readonly duration: Histogram<'upstream'>;
  private readonly inFlight: Gauge<'upstream'>;
  private readonly figures = new Map<string, UpstreamFigures>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'wsrpc_upstream_requests_total',
      help: 'Calls to upstreams by upstream and outcome (ok, error, unavailable, timeout, busy, cancelled).',
      labelNames: ['upstream', 'outcome'],
      registers,
      collect: () => this.reportRequests(),
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
      collect: () => {
        for (const figures of this.figures.values()) {
          if (figures.shown) this.inFlight.set(figures.labels, figures.inFlight);
        }
      },
    });
  }

  started(upstream: string): void {
    const figures = this.of(upstream);
    figures.inFlight++;
    figures.shown = true;
  }

  settled(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    const figures = this.of(upstream);
    figures.unreported[outcome]++;
    if (outcome === 'busy') return; // refused before it started: no latency, never in flight
    figures.inFlight--;
    this.duration.observe(figures.labels, seconds);
  }

  private of(upstream: string): UpstreamFigures {
    let figures = this.figures.get(upstream);
    if (!figures) {
      const unreported = {} as Record<UpstreamOutcome, number>;
      for (const outcome of OUTCOMES) unreported[outcome] = 0;
      figures = { labels: Object.freeze({ upstream }), inFlight: 0, shown: false, unreported };
      this.figures.set(upstream, figures);
    }
    return figures;
  }

  private reportRequests(): void {
    for (const [upstream, figures] of this.figures) {
      for (const outcome of OUTCOMES) {
        const count = figures.unreported[outcome];
        if (count === 0) continue;
        figures.unreported[outcome] = 0;
        this.requests.inc({ upstream, outcome }, count);
      }
    }
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
