/*
 * Model-based property test of the client's subscription table (src/client/subscriptions.ts)
 * with joined and own subscriptions together, under random joins, leaves, own subscribes and
 * unsubscribes, publishes, dropped connections and reconnects.
 *
 * A model server keeps each topic's full history and one session per connection, as the
 * gateway does: a subscribe is answered, then its position or the replay after its `since`;
 * a join (idempotent per topic) announces `rpc.joined`, then the position; a leave ends every
 * subscription of the session to the topic with `complete`. The client's requests wait in a
 * queue the test serves when it chooses, so replies and joins interleave as on a real socket;
 * a reconnect may be met by the server joining the session at once (an application that
 * rejoins on connect), before the client's own resubscribes are served.
 *
 * What must hold: every Observer sees each seq at most once, in order, without a hole; once
 * everything is served, each Observer still live has the topic's last message; and the server
 * holds exactly one subscription per client entry that wants one (none leaked, none missing).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ClientSubscriptions } from '../../src/client/subscriptions.js';
import type { SubscriptionCaller, SubscriptionEvent } from '../../src/client/subscriptions.js';
import { silentLogger } from '../../src/peer/logger.js';
import { ConnectionClosedError } from '../../src/protocol/local-errors.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';
import type { Params } from '../../src/protocol/types.js';

const TOPICS = ['a', 'b'] as const;
type Topic = (typeof TOPICS)[number];

interface Request {
  method: string;
  params: unknown[];
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  onAccepted?: (id: unknown) => void;
}

/** What one Observer saw. */
interface Watch {
  kind: 'own' | 'joined';
  topic: Topic;
  seqs: number[];
  completed: boolean;
  /** The own Observer's unsubscribe; undefined once it has unsubscribed. */
  stop?: () => void;
}

class Model {
  lastSeq: Record<Topic, number> = { a: 0, b: 0 };
  connected = true;
  /** The server's subscriptions of the current session: id -> topic. */
  serverSubs = new Map<string, Topic>();
  queue: Request[] = [];
  nextId = 0;
  watches: Watch[] = [];
  readonly subs: ClientSubscriptions;

  constructor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- read by the getters below
    const model = this;
    const caller: SubscriptionCaller = {
      call: (method, params) => this.enqueue(method, params),
      subscribe: (method, params, onAccepted) => this.enqueue(method, params, onAccepted),
      retryDelay: () => 0,
      get isOpen() {
        return model.connected;
      },
      get connection() {
        return model.connected ? model : undefined;
      },
      callOn: (_connection, method, params) => this.enqueue(method, params),
      isClosed: false,
    };
    this.subs = new ClientSubscriptions(caller, DEFAULT_SUBSCRIPTION_METHODS, silentLogger);
    this.subs.joined$.subscribe(({ topic, subscription }) => {
      const watch: Watch = { kind: 'joined', topic: topic as Topic, seqs: [], completed: false };
      this.watches.push(watch);
      const observer = subscription.subscribe({
        next: (event) => record(watch, event),
        complete: () => (watch.completed = true),
      });
      watch.stop = () => observer.unsubscribe();
    });
  }

  private enqueue(
    method: string,
    params: Params | undefined,
    onAccepted?: (id: unknown) => void,
  ): Promise<unknown> {
    if (!this.connected) {
      // The client's offline queue: sent on the next connection.
      return new Promise((resolve, reject) => {
        this.queue.push({ method, params: params as unknown[], resolve, reject, onAccepted });
      });
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ method, params: params as unknown[], resolve, reject, onAccepted });
    });
  }

  private frame(id: string, params: Record<string, unknown>): void {
    expect(this.subs.handleNotification({ subscription: id, ...params }, 0)).toBe(true);
  }

  /** Serve the client's requests waiting on this connection. */
  serve(): void {
    if (!this.connected) return;
    for (const request of this.queue.splice(0)) {
      if (request.method === 'unsubscribe') {
        request.resolve(this.serverSubs.delete(request.params[0] as string));
        continue;
      }
      const [topic, , options] = request.params as [Topic, null, { since?: number }];
      const id = `s${++this.nextId}`;
      this.serverSubs.set(id, topic);
      request.onAccepted?.(id);
      request.resolve(id);
      this.start(id, topic, options.since);
    }
  }

  private start(id: string, topic: Topic, since: number | undefined): void {
    if (since === undefined) this.frame(id, { seq: this.lastSeq[topic] });
    else for (let seq = since + 1; seq <= this.lastSeq[topic]; seq++) this.message(id, topic, seq);
  }

  private message(id: string, topic: Topic, seq: number): void {
    this.frame(id, { seq, result: `${topic}${seq}` });
  }

  publish(topic: Topic): void {
    const seq = ++this.lastSeq[topic];
    for (const [id, subTopic] of this.serverSubs) {
      if (subTopic === topic) this.message(id, topic, seq);
    }
  }

  join(topic: Topic): void {
    if (!this.connected || [...this.serverSubs.values()].includes(topic)) return;
    const id = `s${++this.nextId}`;
    this.serverSubs.set(id, topic);
    this.subs.handleJoined({ topic, subscription: id });
    this.start(id, topic, undefined);
  }

  leave(topic: Topic): void {
    for (const [id, subTopic] of [...this.serverSubs]) {
      if (subTopic !== topic) continue;
      this.serverSubs.delete(id);
      this.frame(id, { complete: true });
    }
  }

  subscribeOwn(topic: Topic): void {
    const watch: Watch = { kind: 'own', topic, seqs: [], completed: false };
    const subscription = this.subs.observe<unknown>(topic).subscribe({
      next: (event) => record(watch, event),
      complete: () => (watch.completed = true),
    });
    watch.stop = () => subscription.unsubscribe();
    this.watches.push(watch);
  }

  /** An Observer (own or joined) goes; a joined subscription stays all the same. */
  unwatch(kind: Watch['kind'], index: number): void {
    const own = this.watches.filter((w) => w.kind === kind && w.stop && !w.completed);
    const watch = own[index % Math.max(1, own.length)];
    watch?.stop?.();
    if (watch) watch.stop = undefined;
  }

  drop(): void {
    if (!this.connected) return;
    this.connected = false;
    this.serverSubs.clear();
    // The requests of the lost connection fail with it; what was queued offline stays.
    for (const request of this.queue.splice(0)) request.reject(new ConnectionClosedError());
    this.subs.connectionLost();
  }

  reconnect(rejoin: Topic | undefined): void {
    if (this.connected) return;
    this.connected = true;
    if (rejoin) this.join(rejoin);
    this.subs.connectionOpened();
  }

  /** Watches that still want messages. */
  live(): Watch[] {
    return this.watches.filter((w) => !w.completed && w.stop);
  }
}

/** The client's entries (its private table): what it keeps and means to hold on the server. */
function entriesOf(subs: ClientSubscriptions): Iterable<{
  key: string;
  joined: boolean;
  observers: number;
  params: unknown[];
}> {
  return (subs as unknown as { shared: Map<string, never> }).shared.values();
}

/**
 * What the Observers saw wrong, checked after each run: an assertion thrown in an Observer's
 * `next` would be reported by rxjs later, outside the property, and not shrunk.
 */
const violations: string[] = [];

function record(watch: Watch, event: SubscriptionEvent<unknown>): void {
  const previous = watch.seqs.at(-1);
  if (event.gap !== undefined) violations.push(`${watch.topic}: a gap signal ${event.gap}`);
  else if (event.data !== `${watch.topic}${event.seq}`) {
    violations.push(`${watch.topic}: ${String(event.data)} as seq ${event.seq}`);
  } else if (previous !== undefined && event.seq !== previous + 1) {
    // No duplicate, no hole: each message follows the last one this Observer saw.
    violations.push(`${watch.topic} (${watch.kind}): seq ${event.seq} after ${previous}`);
  }
  watch.seqs.push(event.seq!);
}

/** Let rejections and retry timers (delay 0) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

const topic = fc.constantFrom(...TOPICS);
const op = fc.oneof(
  fc.record({ t: fc.constant('join' as const), topic }),
  fc.record({ t: fc.constant('leave' as const), topic }),
  fc.record({ t: fc.constant('own' as const), topic }),
  fc.record({
    t: fc.constant('unwatch' as const),
    kind: fc.constantFrom('own' as const, 'joined' as const),
    index: fc.nat(5),
  }),
  fc.record({ t: fc.constant('publish' as const), topic }),
  fc.record({ t: fc.constant('serve' as const) }),
  fc.record({ t: fc.constant('drop' as const) }),
  fc.record({ t: fc.constant('reconnect' as const), rejoin: fc.option(topic, { nil: undefined }) }),
);

let current: Model | undefined;
afterEach(() => {
  current?.subs.closeAll();
  current = undefined;
});

describe('client subscription table with joined and own subscriptions (model)', () => {
  it('no duplicates, no loss, nothing leaked on the server', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60, size: 'max' }), async (ops) => {
        const model = new Model();
        current = model;
        violations.length = 0;
        for (const step of ops) {
          switch (step.t) {
            case 'join':
              model.join(step.topic);
              break;
            case 'leave':
              model.leave(step.topic);
              break;
            case 'own':
              model.subscribeOwn(step.topic);
              break;
            case 'unwatch':
              model.unwatch(step.kind, step.index);
              break;
            case 'publish':
              model.publish(step.topic);
              break;
            case 'serve':
              model.serve();
              break;
            case 'drop':
              model.drop();
              break;
            case 'reconnect':
              model.reconnect(step.rejoin);
              break;
          }
          await settle();
        }
        // Everything served on a connection that stays.
        model.reconnect(undefined);
        for (let i = 0; i < 4; i++) {
          model.serve();
          await settle();
        }
        expect(violations).toEqual([]);
        for (const watch of model.live()) {
          if (watch.seqs.length > 0) expect(watch.seqs.at(-1)).toBe(model.lastSeq[watch.topic]);
        }
        // One server subscription per client entry that wants one: the joined ones (observed
        // or not: one per topic at most) and the own ones still observed.
        const entries = [...entriesOf(model.subs)].filter((e) => e.joined || e.observers > 0);
        expect(model.serverSubs.size).toBe(entries.length);
        expect(new Set(entries.map((e) => e.key)).size).toBe(entries.length);
        for (const watch of model.live()) {
          const kind = watch.kind === 'joined';
          expect(entries.some((e) => e.joined === kind && e.params[0] === watch.topic)).toBe(true);
        }
        for (const t of TOPICS) {
          expect(model.subs.subscriptionOf(t) !== undefined).toBe(
            entries.some((e) => e.params[0] === t),
          );
        }
        model.subs.closeAll();
      }),
      {
        numRuns: Number(process.env['MODEL_RUNS'] ?? 150),
        // A join meeting the client's resubscribe of the same topic, both ways round.
        examples: [
          [
            [
              { t: 'join', topic: 'a' },
              { t: 'drop' },
              { t: 'reconnect', rejoin: undefined },
              { t: 'join', topic: 'a' },
            ],
          ],
          [[{ t: 'join', topic: 'a' }, { t: 'drop' }, { t: 'reconnect', rejoin: 'a' }]],
          // Messages published while away, then a rejoin on connect that starts after them.
          [
            [
              { t: 'join', topic: 'a' },
              { t: 'publish', topic: 'a' },
              { t: 'drop' },
              { t: 'publish', topic: 'a' },
              { t: 'reconnect', rejoin: 'a' },
              { t: 'publish', topic: 'a' },
            ],
          ],
        ],
      },
    );
  }, 120_000);
});
