import { Counter, Gauge } from 'prom-client';
import type { Metric, Registry } from 'prom-client';
import type { UpstreamObserver, UpstreamOutcome } from '../upstream/upstream-endpoint.js';
import { upstreamMetrics } from '../upstream/upstream-metrics.js';

/**
 * How a hook call ended: a decision of the upstream, its failure (then `onFailure` decided), or
 * `busy`: refused without a call, its client's share of the upstream taken (429, -32013).
 */
export type HookOutcome = 'accepted' | 'refused' | 'failed' | 'sent' | 'busy';

/**
 * The hooks' metrics, made before the gateway is (its hooks are options of the gateway) and
 * registered on its registry by `attach`: `wsrpc_hook_outcomes_total{hook,outcome}`,
 * `wsrpc_hook_events_queued`, `wsrpc_hook_events_dropped_total{reason}`. The hooks' upstream
 * requests count in `wsrpc_upstream_*` as the routes' do, once attached.
 */
export class HookMetrics implements UpstreamObserver {
  readonly outcomes = new Counter({
    name: 'wsrpc_hook_outcomes_total',
    help: 'Hook calls by hook (connect, subscribe, events) and outcome (accepted, refused, failed, sent, busy).',
    labelNames: ['hook', 'outcome'] as const,
    registers: [],
  });
  readonly queued = new Gauge({
    name: 'wsrpc_hook_events_queued',
    help: 'Lifecycle events waiting to be sent to the events hook.',
    registers: [],
  });
  readonly dropped = new Counter({
    name: 'wsrpc_hook_events_dropped_total',
    help: 'Lifecycle events never delivered: overflow (the queue was full, the oldest went) or undeliverable (retries spent).',
    labelNames: ['reason'] as const,
    registers: [],
  });
  private upstream: UpstreamObserver | undefined;

  outcome(hook: 'connect' | 'subscribe' | 'events', outcome: HookOutcome): void {
    this.outcomes.inc({ hook, outcome });
  }

  register(registry: Registry): void {
    const metrics = [
      ['wsrpc_hook_outcomes_total', this.outcomes],
      ['wsrpc_hook_events_queued', this.queued],
      ['wsrpc_hook_events_dropped_total', this.dropped],
    ] as const;
    for (const [name, metric] of metrics) {
      if (!registry.getSingleMetric(name)) registry.registerMetric(metric as Metric<string>);
    }
    this.upstream = upstreamMetrics(registry);
  }

  started(upstream: string): void {
    this.upstream?.started(upstream);
  }

  settled(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    this.upstream?.settled(upstream, outcome, seconds);
  }
}
