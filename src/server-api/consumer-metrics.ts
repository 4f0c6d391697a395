// The broker consumer of the server API in Prometheus metrics, on the gateway's registry, so an
// operator can tell that a node's consumer is stuck (its broker unreachable, its group lost, its
// handlers all held) and what it refuses:
//   wsrpc_server_api_consumer_up{kind}                 1 while it reads its broker, else 0
//   wsrpc_server_api_consumed_total{kind,outcome}      requests taken: handled, busy, too_large, invalid,
//                                                      delivered_too_often
//   wsrpc_server_api_consumer_failures_total{kind,reason}  read, group_lost, disconnected, subscription,
//                                                      reply_too_large
//   wsrpc_server_api_consumer_in_progress{kind}        requests being handled now
//   wsrpc_server_api_consumer_queued{kind}             NATS: messages waiting on the node
// The consumer moves plain numbers (ConsumerFigures); prom-client reads them when scraped.
import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

export type ConsumerKind = 'redis' | 'nats';

/**
 * What became of a request taken: `handled` (answered, whatever the answer), `busy` (NATS: its
 * queue was full, refused with -32000), `too_large` (over maxBodyBytes), `invalid` (not UTF-8,
 * or a Redis entry without a `request` field), `delivered_too_often` (Redis: taken over after
 * consume.maxDeliveries deliveries; to the dead-letter stream, not handled).
 */
export type ConsumedOutcome = 'handled' | 'busy' | 'too_large' | 'invalid' | 'delivered_too_often';

/**
 * Why the consumer could not read: `read` (a Redis read or group creation failed: Redis
 * unreachable, a command refused), `group_lost` (the stream's consumer group was gone and is
 * made again), `disconnected` (NATS connection lost), `subscription` (NATS subscription error),
 * `reply_too_large` (NATS: a reply over the server's max_payload, sent as -32603 instead).
 */
export type ConsumerFailure =
  'read' | 'group_lost' | 'disconnected' | 'subscription' | 'reply_too_large';

const OUTCOMES: readonly ConsumedOutcome[] = [
  'handled',
  'busy',
  'too_large',
  'invalid',
  'delivered_too_often',
];
const FAILURES: readonly ConsumerFailure[] = [
  'read',
  'group_lost',
  'disconnected',
  'subscription',
  'reply_too_large',
];

/** One kind of consumer's figures on one registry (a server API started again shares them). */
export class ConsumerFigures {
  /** It reads its broker now: the last Redis read worked; NATS connected and subscribed. */
  up = false;
  inProgress = 0;
  queued = 0;
  readonly consumed = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<
    ConsumedOutcome,
    number
  >;
  readonly failures = Object.fromEntries(FAILURES.map((f) => [f, 0])) as Record<
    ConsumerFailure,
    number
  >;

  constructor(readonly kind: ConsumerKind) {}
}

const byRegistry = new WeakMap<Registry, Map<ConsumerKind, ConsumerFigures>>();

/** The figures of `kind`'s consumer on `registry`, its metrics registered the first time. */
export function consumerFigures(registry: Registry, kind: ConsumerKind): ConsumerFigures {
  let kinds = byRegistry.get(registry);
  if (!kinds) {
    kinds = new Map();
    byRegistry.set(registry, kinds);
    register(registry, kinds);
  }
  let figures = kinds.get(kind);
  if (!figures) {
    figures = new ConsumerFigures(kind);
    kinds.set(kind, figures);
  }
  return figures;
}

function register(registry: Registry, kinds: ReadonlyMap<ConsumerKind, ConsumerFigures>): void {
  const registers = [registry];
  new Gauge({
    name: 'wsrpc_server_api_consumer_up',
    help: 'Whether the server API consumer reads its broker (1) or cannot, or is closed (0), by kind (redis, nats).',
    labelNames: ['kind'],
    registers,
    collect() {
      for (const { kind, up } of kinds.values()) this.set({ kind }, up ? 1 : 0);
    },
  });
  new Counter({
    name: 'wsrpc_server_api_consumed_total',
    // The values listed from the label's own list: a value added there is named here too.
    help: `Requests the server API consumer took, by kind and outcome (${OUTCOMES.join(', ')}).`,
    labelNames: ['kind', 'outcome'],
    registers,
    collect() {
      this.reset();
      for (const { kind, consumed } of kinds.values()) {
        for (const outcome of OUTCOMES) this.inc({ kind, outcome }, consumed[outcome]);
      }
    },
  });
  new Counter({
    name: 'wsrpc_server_api_consumer_failures_total',
    help: `Times the server API consumer could not read, by kind and reason (${FAILURES.join(', ')}).`,
    labelNames: ['kind', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const { kind, failures } of kinds.values()) {
        for (const reason of FAILURES) this.inc({ kind, reason }, failures[reason]);
      }
    },
  });
  new Gauge({
    name: 'wsrpc_server_api_consumer_in_progress',
    help: 'Consumed requests being handled now, by kind (at most consume.maxConcurrent).',
    labelNames: ['kind'],
    registers,
    collect() {
      for (const { kind, inProgress } of kinds.values()) this.set({ kind }, inProgress);
    },
  });
  new Gauge({
    name: 'wsrpc_server_api_consumer_queued',
    help: 'NATS messages waiting on the node for a free slot (at most consume.maxQueued).',
    labelNames: ['kind'],
    registers,
    collect() {
      for (const { kind, queued } of kinds.values()) {
        if (kind === 'nats') this.set({ kind }, queued);
      }
    },
  });
}
