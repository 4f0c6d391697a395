import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { CallOutcome } from '../peer/peer.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { TransportKind } from '../transport/transport.js';

/** Upper bounds (seconds) of the call latency histogram's buckets. */
const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

const OUTCOMES: readonly CallOutcome[] = ['ok', 'error', 'not_found', 'rejected'];

/**
 * How often (ms) the event-loop delay behind prom-client's `nodejs_eventloop_lag_*` is sampled.
 * Its default, Node's 10 ms, wakes an idle gateway 100 times a second (most of what an idle
 * gateway spends); at 100 ms a loop held busy is still seen (the next sample comes late by as
 * long), from 10 samples a second.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** Method label for calls to methods that are not registered: names from the wire are unbounded. */
const UNKNOWN_METHOD = '(unknown)';

/**
 * The gateway's own methods (`rpc.authenticate`, `rpc.discover`, ...), labelled by their names:
 * a fixed set, unlike the `rpc.*` names a client may make up, which are `(unknown)`.
 */
const RESERVED_LABELS: ReadonlySet<string> = new Set(Object.values(ReservedMethod));

/** The `method` label of a call to `method`, given the registrations' label (`methodLabel`). */
function methodLabelOf(method: string, registered: string | undefined): string {
  if (registered !== undefined) return registered;
  return RESERVED_LABELS.has(method) ? method : UNKNOWN_METHOD;
}

/**
 * prom-client's default metrics (`process_*`, `nodejs_*`), in a registry of their own made once
 * per process, on the first GatewayMetrics that asks for them, and rendered into every gateway's
 * text. They describe the process, whatever number of gateways it runs; and what they start (a
 * GC observer, an event-loop delay monitor) prom-client never stops, and it holds the registry it
 * was given: one per gateway would keep every gateway that was ever made, closed or not, and
 * sample the event loop once more for each.
 */
let processRegistry: Registry | undefined;

function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({
      register: processRegistry,
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
  }
  return processRegistry;
}

/**
 * The transports whose sessions are counted apart (the `transport` label of rpc_connections and
 * the message counters). HTTP POST exchanges are not connections, and are counted in neither.
 */
export const COUNTED_TRANSPORTS = ['websocket', 'sse', 'tcp', 'stdio'] as const;
export type CountedTransport = (typeof COUNTED_TRANSPORTS)[number];

/** The plain numbers a transport bumps per message (the hot path: no label lookup). */
export interface MessageCounters {
  messagesIn: number;
  messagesOut: number;
}

/** Sessions counted by their transport's kind, for `MetricsSources.connections`. */
export function countByTransport(
  sessions: Iterable<{ readonly transport: { readonly kind: TransportKind } }>,
): Partial<Record<TransportKind, number>> {
  const counts: Partial<Record<TransportKind, number>> = {};
  for (const { transport } of sessions) counts[transport.kind] = (counts[transport.kind] ?? 0) + 1;
  return counts;
}

interface MethodStats {
  outcomes: Record<CallOutcome, number>;
  /** Cumulative-free bucket counts; index LATENCY_BUCKETS.length is +Inf. */
  buckets: number[];
  sum: number;
  count: number;
}

export interface MetricsSources {
  /** Open sessions by transport kind (a kind with none may be left out). */
  connections(): Partial<Record<TransportKind, number>>;
  /** Local subscriptions by topic name (used only when `subscriptionsByPattern` is not given). */
  subscriptionsByTopic(): Record<string, number>;
  /**
   * Local subscriptions by declared topic (`room.*` once, not each room a client chose):
   * the `topic` label's values stay as few as the declarations (PubSubService.subscriptionsByPattern).
   */
  subscriptionsByPattern?(): Record<string, number>;
  /** Topics the node holds on the broker for its clients (what limits.maxTopics bounds). */
  topicsHeld?(): number;
  /** Closed connections (and ended POST exchanges) whose slots wait for the runs they left going. */
  closedHoldingSlots?(): number;
  dropped(): number;
  slowConsumerDisconnects(): number;
  /**
   * The `method` label of a call: its registered name, or the route's pattern (`orders.*`) for a
   * method a prefix route answers; undefined for an unknown one. Labels stay as few as the
   * registrations, whatever names clients send.
   */
  methodLabel(method: string): string | undefined;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/**
 * The gateway's Prometheus metrics. The hot path only bumps plain numbers
 * (a prom-client label lookup per call would cost more than the call); the
 * values are copied into prom-client metrics when /metrics is scraped, and the
 * per-method latency histogram is rendered here directly.
 */
export class GatewayMetrics {
  /**
   * The gateway's own metrics (and those registered on it: upstreams, deflate, the server API's
   * consumer, an application's). The process's default metrics are not in it: `render` adds them.
   */
  readonly registry = new Registry();
  /** The process's default metrics (processMetrics), unless `defaultMetrics: false`. */
  private readonly processRegistry: Registry | undefined;
  /** Each counted transport's message counters, handed to its transports by `countersFor`. */
  private readonly messages = Object.fromEntries(
    COUNTED_TRANSPORTS.map((kind) => [kind, { messagesIn: 0, messagesOut: 0 }]),
  ) as Record<CountedTransport, MessageCounters>;
  private readonly methods = new Map<string, MethodStats>();
  private readonly rejectedUpgrades: Counter<'reason'>;
  private readonly closedHttpSockets: Counter<'reason'>;

  /** limits.metricsCacheMs: how long a rendered text is reused. */
  private readonly cacheMs: number;
  private readonly now: () => number;
  /** The render under way, which every scrape arriving meanwhile shares. */
  private rendering: Promise<string> | undefined;
  /** The last rendered text and when it was done (on `now`'s clock), while cacheMs > 0. */
  private rendered: { text: string; at: number } | undefined;

  constructor(
    private readonly sources: MetricsSources,
    options: {
      defaultMetrics?: boolean;
      /** How long (ms) a rendered text is reused (limits.metricsCacheMs); 0: not reused. */
      cacheMs?: number;
      /** The clock cacheMs is measured on. */
      now?: () => number;
    } = {},
  ) {
    this.cacheMs = options.cacheMs ?? 0;
    this.now = options.now ?? Date.now;
    const registers = [this.registry];
    this.processRegistry = (options.defaultMetrics ?? true) ? processMetrics() : undefined;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client binds `this` in collect() to the metric
    const stats = this;
    new Gauge({
      name: 'rpc_connections',
      help: 'Open sessions by transport (websocket, sse, tcp, stdio).',
      labelNames: ['transport'],
      registers,
      collect() {
        this.reset();
        const open = sources.connections();
        for (const transport of COUNTED_TRANSPORTS) this.set({ transport }, open[transport] ?? 0);
      },
    });
    new Counter({
      name: 'rpc_messages_received_total',
      help: 'Messages (a batch is one) received from clients, by transport (websocket, sse, tcp, stdio).',
      labelNames: ['transport'],
      registers,
      collect() {
        this.reset();
        for (const transport of COUNTED_TRANSPORTS) {
          this.inc({ transport }, stats.messages[transport].messagesIn);
        }
      },
    });
    new Counter({
      name: 'rpc_messages_sent_total',
      help: 'Messages (a batch is one) sent to clients, by transport (websocket, sse, tcp, stdio).',
      labelNames: ['transport'],
      registers,
      collect() {
        this.reset();
        for (const transport of COUNTED_TRANSPORTS) {
          this.inc({ transport }, stats.messages[transport].messagesOut);
        }
      },
    });
    new Counter({
      name: 'rpc_calls_total',
      help: 'Incoming calls by method and outcome (ok, error, not_found, rejected).',
      labelNames: ['method', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [method, entry] of stats.methods) {
          for (const outcome of OUTCOMES) {
            if (entry.outcomes[outcome] > 0) this.inc({ method, outcome }, entry.outcomes[outcome]);
          }
        }
      },
    });
    new Gauge({
      name: 'rpc_subscriptions',
      help: 'Local subscriptions by declared topic (one series for a prefix such as room.*).',
      labelNames: ['topic'],
      registers,
      collect() {
        this.reset();
        const counts = sources.subscriptionsByPattern?.() ?? sources.subscriptionsByTopic();
        for (const [topic, count] of Object.entries(counts)) this.set({ topic }, count);
      },
    });
    const topicsHeld = sources.topicsHeld?.bind(sources);
    if (topicsHeld) {
      new Gauge({
        name: 'rpc_topics_held',
        help: 'Topics this node holds on the broker: subscribed, or whose $presence it watches (limits.maxTopics).',
        registers,
        collect() {
          this.set(topicsHeld());
        },
      });
    }
    const closedHolding = sources.closedHoldingSlots?.bind(sources);
    if (closedHolding) {
      new Gauge({
        name: 'rpc_closed_connections_holding_slots',
        help: 'Closed connections and ended POST /rpc exchanges still counted in the connection limits: handlers or hooks they left running have not settled.',
        registers,
        collect() {
          this.set(closedHolding());
        },
      });
    }
    new Counter({
      name: 'rpc_dropped_messages_total',
      help: 'Topic or stream messages not delivered to a slow subscriber.',
      registers,
      collect() {
        this.reset();
        this.inc(sources.dropped());
      },
    });
    new Counter({
      name: 'rpc_slow_consumer_disconnects_total',
      help: 'Connections closed with 1013 because a subscriber could not keep up.',
      registers,
      collect() {
        this.reset();
        this.inc(sources.slowConsumerDisconnects());
      },
    });
    this.rejectedUpgrades = new Counter({
      name: 'rpc_rejected_upgrades_total',
      help: 'Connections refused before they opened (WebSocket upgrades, event streams and their resumes, HTTP POST requests), by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.closedHttpSockets = new Counter({
      name: 'rpc_http_sockets_closed_total',
      help: 'Sockets of the HTTP port closed before their request was served, by reason (ip-limit, capacity, headers-timeout, body-timeout, probe-rate).',
      labelNames: ['reason'],
      registers,
    });
  }

  /** The counters the transports of `kind` bump for each message in and out. */
  countersFor(kind: CountedTransport): MessageCounters {
    return this.messages[kind];
  }

  /** Messages received over every transport. */
  get messagesIn(): number {
    return COUNTED_TRANSPORTS.reduce((sum, kind) => sum + this.messages[kind].messagesIn, 0);
  }

  /** Messages sent over every transport. */
  get messagesOut(): number {
    return COUNTED_TRANSPORTS.reduce((sum, kind) => sum + this.messages[kind].messagesOut, 0);
  }

  /** Called by every session's peer once an incoming call is answered. */
  callSettled(method: string, outcome: CallOutcome, durationMs: number): void {
    const name = methodLabelOf(method, this.sources.methodLabel(method));
    let entry = this.methods.get(name);
    if (!entry) {
      entry = {
        outcomes: { ok: 0, error: 0, not_found: 0, rejected: 0 },
        buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0),
        sum: 0,
        count: 0,
      };
      this.methods.set(name, entry);
    }
    entry.outcomes[outcome]++;
    if (outcome !== 'ok' && outcome !== 'error') return; // refused before running: no latency
    const seconds = durationMs / 1000;
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
    entry.buckets[i]!++;
    entry.sum += seconds;
    entry.count++;
  }

  upgradeRejected(reason: string): void {
    this.rejectedUpgrades.inc({ reason });
  }

  /** A socket of the HTTP port over its bounds (SocketGate), or too slow with its headers or body. */
  httpSocketClosed(reason: string): void {
    this.closedHttpSockets.inc({ reason });
  }

  /**
   * The Prometheus text exposition: the process's default metrics, the gateway's registry and
   * the latency histogram. A render walks every local topic and reads the process's file
   * descriptors, so it is done once at a time, its promise shared by every call that comes
   * while it runs, and its text returned again for `cacheMs` after it finished: however many
   * scrapes come, at most one render per cacheMs (one at a time when 0).
   */
  render(): Promise<string> {
    const rendered = this.rendered;
    if (rendered !== undefined && this.now() - rendered.at < this.cacheMs) {
      return Promise.resolve(rendered.text);
    }
    if (this.rendering !== undefined) return this.rendering;
    const rendering = this.renderNow().then(
      (text) => {
        this.rendering = undefined;
        if (this.cacheMs > 0) this.rendered = { text, at: this.now() };
        return text;
      },
      (err: unknown) => {
        this.rendering = undefined;
        throw err;
      },
    );
    this.rendering = rendering;
    return rendering;
  }

  private async renderNow(): Promise<string> {
    const [processText, ownText] = await Promise.all([
      this.processRegistry?.metrics() ?? '',
      this.registry.metrics(),
    ]);
    return processText + ownText + this.renderLatency();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private renderLatency(): string {
    const name = 'rpc_call_duration_seconds';
    const lines = [
      `# HELP ${name} Time from a call's arrival to its answer, by method.`,
      `# TYPE ${name} histogram`,
    ];
    for (const [method, entry] of this.methods) {
      if (entry.count === 0) continue;
      const label = escapeLabel(method);
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((bound, i) => {
        cumulative += entry.buckets[i]!;
        lines.push(`${name}_bucket{le="${bound}",method="${label}"} ${cumulative}`);
      });
      lines.push(`${name}_bucket{le="+Inf",method="${label}"} ${entry.count}`);
      lines.push(`${name}_sum{method="${label}"} ${entry.sum}`);
      lines.push(`${name}_count{method="${label}"} ${entry.count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}
