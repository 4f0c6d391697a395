/**
 * The chaos engine (issue 13). Three gateway processes (test/cluster/node.ts, bundled with the
 * current src/) on a private broker the engine started itself (test/chaos/private-broker.ts:
 * redis-server without persistence, or nats-server -js with its own store directory); node C
 * reaches it through a TcpRelay, so its broker link alone can be cut. Subscribers are the
 * project's own RpcClient, each subscribed (subscribeWithMeta) to every topic for the whole run:
 *   - three "failover" clients with all three node URLs (each starting at another node);
 *   - three "sticky" clients with one node's URL only: when that node dies they wait for it and
 *     resume from their last seq when it is back;
 *   - three "replayer" clients, also sticky, subscribed to `big` alone, which keeps more history
 *     than is published while a node is down: they resume with a large replay (> 256 messages).
 * Sticky clients and replayers are slow ones too: right after each reconnect their event loop
 * is busy for `stallMs` (as a busy browser tab's), so the subscribe reply and the replay behind
 * it arrive together, in one socket read.
 * Beside them, raw-protocol subscribers on node C (test/chaos/raw-subscriber.ts): plain `ws`
 * sockets speaking the wire protocol by hand, on the topic with the shortest history (`t0`),
 * one with `{"position": true}` (it reads its position, messages, gap signals, epoch notices)
 * and one plain `[topic]` (losses come as `missed` on the next message). RpcClient repairs a
 * silent hole by itself (it resubscribes from history), so only these show whether the server
 * tells its subscribers what its node lost. They connect once and never reconnect, so each is
 * owed only the messages inside its window:
 *   - it opens at the subscribe: a position subscriber is owed every accepted seq after its
 *     position; a plain one (no position) every seq after the last one accepted for a publish
 *     started before its subscribe reply arrived (any later publish reached C after the
 *     subscription was in place);
 *   - it closes before anything that would end the subscription: before C is SIGKILLed or
 *     drained, and, for the plain one, before a broker restart that renumbers the topic (Redis:
 *     the plain convention has no signal for a new numbering). It is then owed up to the last
 *     seq accepted at that moment, which it is given RAW_DEADLINE_MS to receive before the
 *     fault; what it receives after is not counted. A new one of the same kind takes over once
 *     C (or the broker) is back. Otherwise it runs to the end of the run.
 * The partition (C's link cut longer than history) always finds them connected, as do the
 * broker restart (position subscriber), the kills and drains of A and B. Their accounts join
 * the others in the table (and its zero-silent-loss total); rows of theirs alone follow it.
 * A publisher (URLs of A and B: never on the node whose link is cut) publishes `{t, i}` at a
 * steady rate spread over the topics and records the seq each publish returned: the
 * authoritative list per topic (a rejected publish is owed to nobody).
 *
 * Faults, in a cycle repeated until `seconds` have passed (each at least once):
 *   node-kill       SIGKILL a node, restart it on the same port after `nodeDownMs`;
 *   broker-restart  SIGKILL the broker, restart it after `brokerDownMs` (Redis comes back
 *                   empty: a new numbering; NATS keeps its streams);
 *   partition       cut node C's broker link for longer than it takes to publish more than
 *                   the topics' history (200), then restore it;
 *   drain           POST /drain to a node (rpc.reconnect to its clients), restart it.
 * After each restart or restore a fresh client connects to that node's URL alone and must
 * receive a message (new sessions reach it). Each message is attributed to the scenario
 * running when it was published; test/chaos/accounting.ts classifies it per subscription.
 *
 * Everything is bounded: each wait has a deadline (a hang becomes a reported failure), the
 * publisher caps its publishes in flight, and the cluster's cleanup kills every process.
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import type { RpcClient } from '../../src/client/client.js';
import { Cluster, Subscriber, buildNodeScript } from '../support/cluster.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { httpGet } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { root } from '../support/environment.js';
import { settle, waitFor } from '../support/waiting.js';
import { sleep } from '../support/promises.js';
import type { BrokerKind } from '../support/brokers.js';
import type { GatewayNode, NodeInfo } from '../support/cluster.js';
import {
  PublishLog,
  accountSubscription,
  formatTable,
  median,
  rowsByScenario,
  seqRanges,
  totalRow,
} from './accounting.js';
import type { AccountWindow, Row, SubscriptionAccount } from './accounting.js';
import { PrivateBroker } from './private-broker.js';
import { RawSubscriber } from './raw-subscriber.js';
import type { RawKind } from './raw-subscriber.js';

export const SCENARIOS = ['steady', 'node-kill', 'broker-restart', 'partition', 'drain'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface TopicSpec {
  name: string;
  /** History maxLength. */
  history: number;
}

export interface ChaosOptions {
  broker: BrokerKind;
  /** Keep injecting faults this long (s); one full cycle (each fault once) at least. */
  seconds: number;
  /** Publishes per second, all topics together. Default 300. */
  rate?: number;
  /** The clients' reconnect backoff cap (ms). Default 1 000. */
  backoffCapMs?: number;
  /** How long sticky clients and replayers are busy right after each reconnect (ms). Default 150; 0: never. */
  stallMs?: number;
  /** Default: big with history 5 000, t0 and t1 with history 200. */
  topics?: TopicSpec[];
  /** A node script already built by buildNodeScript (else built here and removed after). */
  script?: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** What a subscription recorded (an RpcClient subscription or a raw one). */
interface Recorded {
  label: string;
  topic: string;
  events: readonly { data: unknown; gap?: number | null }[];
  times: readonly number[];
}

/** One fault injected. */
export interface FaultRecord {
  scenario: Scenario;
  node?: string;
  at: number;
  /** Subscriptions affected, each with the moment service was back for it. */
  watched: { subscriber: Recorded; from: number }[];
  /** The raw subscribers inside their window when it was injected. */
  rawExposed: string[];
  /** Resume time of each watched subscription (ms): set when accounted. */
  resumeMs: number[];
  /** What happened, for the report. */
  notes: string[];
}

/** A fresh client on one node's URL after it was restarted or reconnected to the broker. */
export interface Probe {
  scenario: Scenario;
  node: string;
  ok: boolean;
  ms: number;
  error?: string;
}

export interface ChaosResult {
  broker: BrokerKind;
  /** One row per scenario, then the total (every subscription, raw ones included). */
  rows: Row[];
  /** The same for the raw-protocol subscribers alone (`raw <scenario>`, then `raw all`). */
  rawRows: Row[];
  table: string;
  backoffCapMs: number;
  faults: FaultRecord[];
  probes: Probe[];
  /** Every subscription's account, the raw subscribers' last. */
  accounts: SubscriptionAccount[];
  /** Silently lost + duplicates + reordered, all scenarios. */
  violations: number;
  /** Which subscription lost, duplicated or reordered what. */
  details: string[];
  /** Anything else wrong: wrong seqs or counts, foreign payloads, subscription errors, failed probes. */
  problems: string[];
  /** Context: rejected publishes, signals, reconnect lags. */
  notes: string[];
  elapsedMs: number;
}

/**
 * `big` first: clients subscribe in this order, so after a reconnect its replay is the first
 * to follow the subscribe replies (in the same socket read, for a client that was busy).
 */
const DEFAULT_TOPICS: TopicSpec[] = [
  { name: 'big', history: 5_000 },
  { name: 't0', history: 200 },
  { name: 't1', history: 200 },
];
const MAX_IN_FLIGHT = 400;
const WARMUP_MS = 2_000;
const NODE_DOWN_MS = 3_000;
const BROKER_DOWN_MS = 2_000;
const DRAIN_DOWN_MS = 1_000;
const SETTLE_MS = 1_500;
/** Deadlines that only turn a hang into a failure. */
const PROBE_DEADLINE_MS = 15_000;
const FINAL_DEADLINE_MS = 30_000;
/** How long a raw subscriber whose window ends is given to receive what it is owed. */
const RAW_DEADLINE_MS = 10_000;
const RAW_KINDS: readonly RawKind[] = ['position', 'plain'];

interface Slot {
  name: string;
  port: number;
  env: Record<string, string>;
  node: GatewayNode;
}

/** Run the engine: start everything, inject the faults, account, clean up. */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const built = options.script === undefined ? await buildNodeScript() : undefined;
  const cluster = new Cluster(options.script ?? built!.script, options.broker);
  try {
    return await new Engine(cluster, options).run();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`${message}\nchild processes:\n${cluster.outputs()}`, { cause: err });
  } finally {
    await cluster.cleanup();
    if (built) rmSync(built.dir, { recursive: true, force: true });
  }
}

/** The commit the run uses, and whether src/ differs from it (other work in progress). */
export function describeCode(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trimEnd();
    const head = git('log', '--oneline', '-1');
    const dirty = git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean);
    return dirty.length === 0
      ? `${head} (src/ clean)`
      : `${head} + uncommitted changes in ${dirty.length} src/ file(s): ${dirty.map((l) => l.slice(3)).join(', ')}`;
  } catch {
    return 'unknown commit (no git)';
  }
}

class Engine {
  private readonly broker: PrivateBroker;
  /** Node C's way to the broker (made once the broker has its port). */
  private relay = new TcpRelay(0);
  private readonly topics: TopicSpec[];
  private readonly rate: number;
  private readonly backoffCapMs: number;
  private readonly log: PublishLog;
  private readonly say: (line: string) => void;
  private readonly slots: Slot[] = [];
  private readonly subscribers: Subscriber[] = [];
  private readonly failover: { label: string; client: RpcClient; subs: Subscriber[] }[] = [];
  /** The subscriptions of the clients that know only this node, by node. */
  private readonly sticky = new Map<string, Subscriber[]>();
  /** Every raw-protocol subscriber opened on C, in order. */
  private readonly raw: RawSubscriber[] = [];
  private rawOpened = 0;
  /** The raw subscribers' topic: the one with the shortest history (the partition outruns it). */
  private readonly rawTopic: string;
  /** Set once accounted: sockets closing after that are cleanup. */
  private accounted = false;
  private readonly faults: FaultRecord[] = [];
  private readonly probes: Probe[] = [];
  private readonly problems: string[] = [];
  private publisher: RpcClient | undefined;
  private phase: Scenario = 'steady';
  /** The broker numbering publishes go to now (bumped after a Redis restart). */
  private gen = 0;
  private inFlight = 0;
  private skippedTicks = 0;
  private readonly start = Date.now();

  constructor(
    private readonly cluster: Cluster,
    private readonly options: ChaosOptions,
  ) {
    this.broker = new PrivateBroker(cluster, options.broker);
    this.topics = options.topics ?? DEFAULT_TOPICS;
    this.rate = options.rate ?? 300;
    this.backoffCapMs = options.backoffCapMs ?? 1_000;
    this.log = new PublishLog(this.topics.map((t) => t.name));
    this.rawTopic = this.topics.reduce((a, b) => (b.history < a.history ? b : a)).name;
    this.say = (line) =>
      options.log?.(`[${((Date.now() - this.start) / 1000).toFixed(1)}s] ${line}`);
  }

  async run(): Promise<ChaosResult> {
    await this.setUp();
    const stopPublishing = this.publish();
    let stopped = false;
    try {
      this.say(`steady: publishing ${this.rate}/s over ${this.topics.length} topics`);
      await sleep(WARMUP_MS);
      const faultsFrom = Date.now();
      for (let cycle = 0; ; cycle++) {
        await this.nodeKill(this.slots[cycle % 3]!);
        await this.brokerRestart();
        await this.partition();
        await this.drain(this.slots[(cycle + 1) % 3]!);
        if (Date.now() - faultsFrom >= this.options.seconds * 1_000) break;
      }
      this.phase = 'steady';
      await sleep(SETTLE_MS);
      stopped = true;
      await stopPublishing();
      await this.finalMarkers();
    } finally {
      if (!stopped) await stopPublishing();
    }
    return this.account();
  }

  // --- setting up ----------------------------------------------------------------------------

  private async setUp(): Promise<void> {
    await this.broker.start();
    this.relay = new TcpRelay(this.broker.port);
    await this.relay.start();
    this.cluster.defer(() => this.relay.cut());
    const key = this.options.broker === 'redis' ? 'REDIS_URL' : 'NATS_URL';
    const topics = this.topics.map((t) => `${t.name}:${t.history}`).join(',');
    const envs: [string, Record<string, string>][] = [
      ['A', { TOPICS: topics, [key]: this.broker.url() }],
      ['B', { TOPICS: topics, [key]: this.broker.url() }],
      ['C', { TOPICS: topics, [key]: this.broker.url(this.relay.port) }],
    ];
    const nodes = await Promise.all(envs.map(([name, env]) => this.cluster.node(name, { env })));
    const urls = nodes.map((node) => node.url);
    const big = this.topics.reduce((a, b) => (b.history > a.history ? b : a));
    nodes.forEach((node, k) => {
      this.slots.push({ name: node.name, port: node.port, env: envs[k]![1], node });
      const sticky = this.client([node.url]);
      const replayer = this.client([node.url]);
      this.slowAfterReconnect(sticky);
      this.slowAfterReconnect(replayer);
      this.sticky.set(node.name, [
        ...this.subscribe(`S@${node.name}`, sticky),
        ...this.subscribe(`R@${node.name}`, replayer, [big]),
      ]);
    });
    for (let k = 0; k < 3; k++) {
      const label = `F${k + 1}`;
      const client = this.client([...urls.slice(k), ...urls.slice(0, k)]);
      this.failover.push({ label, client, subs: this.subscribe(label, client) });
    }
    await this.openRaw(RAW_KINDS, true);
    // Every subscription in place before the first publish: each is owed everything.
    const want = (topic: string): number =>
      this.subscribers.filter((sub) => sub.topic === topic).length +
      this.rawLive().filter((sub) => sub.topic === topic).length;
    let counts: Record<string, number> = {};
    await waitFor(
      async () => {
        counts = {};
        for (const slot of this.slots) {
          const info = await this.info(slot.node);
          for (const [topic, n] of Object.entries(info?.topics ?? {})) {
            counts[topic] = (counts[topic] ?? 0) + n;
          }
        }
        return this.topics.every((t) => counts[t.name] === want(t.name));
      },
      () => `every subscription on a node, have ${JSON.stringify(counts)}`,
    );
    this.publisher = this.client([urls[0]!, urls[1]!], {
      whenDisconnected: 'reject',
      callTimeoutMs: 5_000,
    });
    await this.publisher.opened();
    this.say(
      `${this.options.broker} on :${this.broker.port} (C through a relay on :${this.relay.port}); ` +
        `nodes ${nodes.map((n) => `${n.name}:${n.port}`).join(' ')}; ${this.subscribers.length} subscriptions, ` +
        `${this.raw.length} raw on ${this.nodeC.name}`,
    );
  }

  /** C: the node whose broker link is cut (it reaches the broker through the relay). */
  private get nodeC(): Slot {
    return this.slots[2]!;
  }

  /** The raw subscribers inside their window now (connected, owed what is accepted now). */
  private rawLive(kind?: RawKind): RawSubscriber[] {
    return this.raw.filter(
      (sub) =>
        sub.upTo === undefined &&
        sub.closedAt === undefined &&
        (kind === undefined || sub.kind === kind),
    );
  }

  /** New raw subscribers on C, one of each kind; their windows open at their subscribe. */
  private async openRaw(kinds: readonly RawKind[], required: boolean): Promise<void> {
    for (const kind of kinds) {
      const label = `raw-${kind === 'position' ? 'pos' : 'plain'}#${++this.rawOpened}@${this.nodeC.name}`;
      const sub = new RawSubscriber(label, kind, this.nodeC.node.url, this.rawTopic);
      this.cluster.defer(() => sub.terminate());
      try {
        await sub.open(this.gen);
      } catch (err) {
        sub.terminate();
        if (required) throw err;
        this.problems.push(`${label}: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      sub.onClose = () => {
        if (sub.upTo === undefined && !this.accounted) {
          this.problems.push(
            `${label}: its socket closed during ${this.phase} inside its window (it never reconnects)`,
          );
        }
      };
      this.raw.push(sub);
    }
    this.say(
      `raw subscribers on ${this.nodeC.name}: ${this.rawLive()
        .map((s) => s.label)
        .join(', ')}`,
    );
  }

  /**
   * End the windows of `subs` (before something that ends their subscription): each is owed
   * the seqs accepted so far in the current numbering, and given RAW_DEADLINE_MS to receive
   * them. What it gets after is not counted.
   */
  private async endRawWindows(subs: readonly RawSubscriber[], why: string): Promise<void> {
    await Promise.all(
      subs.map(async (sub) => {
        const upTo = { gen: this.gen, seq: this.log.lastSeq(sub.topic, this.gen) };
        sub.upTo = upTo;
        sub.endedBecause = why;
        const reached = (): boolean => {
          const last = sub.lastMessage((data) => this.log.recordOf(sub.topic, data)?.gen);
          return (
            upTo.seq === 0 ||
            (last !== undefined &&
              (last.gen > upTo.gen || (last.gen === upTo.gen && last.seq >= upTo.seq)))
          );
        };
        if (!(await settle(reached, RAW_DEADLINE_MS))) {
          this.say(`${sub.label}: seq ${upTo.seq} not received within ${RAW_DEADLINE_MS} ms`);
        }
      }),
    );
  }

  private client(urls: string[], extra: Parameters<Cluster['client']>[1] = {}): RpcClient {
    return this.cluster.client(urls, {
      reconnect: { initialDelayMs: 100, maxDelayMs: this.backoffCapMs },
      callTimeoutMs: 10_000,
      ...extra,
    });
  }

  /** After each reconnect (not the first connection), keep the event loop busy for `stallMs`. */
  private slowAfterReconnect(client: RpcClient): void {
    const stallMs = this.options.stallMs ?? 150;
    let opened = false;
    client.state$.subscribe((state) => {
      if (state !== 'open') return;
      if (opened && stallMs > 0) {
        // After the subscribe requests this open sends, before their replies are read.
        setTimeout(() => {
          const until = Date.now() + stallMs;
          while (Date.now() < until) {
            // busy, on purpose
          }
        }, 0);
      }
      opened = true;
    });
  }

  private subscribe(label: string, client: RpcClient, topics = this.topics): Subscriber[] {
    const subs = topics.map((topic) => new Subscriber(label, client, topic.name));
    this.subscribers.push(...subs);
    return subs;
  }

  private async info(node: GatewayNode): Promise<NodeInfo | undefined> {
    const { status, body } = await httpGet(`${node.httpUrl}/info`);
    return status === 200 ? (JSON.parse(body) as NodeInfo) : undefined;
  }

  // --- publishing ----------------------------------------------------------------------------

  /** Publish at a steady rate until the returned function is called (it waits for the last replies). */
  private publish(): () => Promise<void> {
    const perTopic = this.rate / this.topics.length;
    const owed = this.topics.map(() => 0);
    let last = Date.now();
    const timer = setInterval(() => {
      const now = Date.now();
      const elapsed = (now - last) / 1_000;
      last = now;
      this.topics.forEach((topic, k) => {
        // A stalled event loop does not turn into a burst.
        owed[k] = Math.min(owed[k]! + perTopic * elapsed, Math.max(1, perTopic / 5));
        for (; owed[k]! >= 1; owed[k]!--) {
          if (this.inFlight >= MAX_IN_FLIGHT) this.skippedTicks++;
          else void this.publishOne(topic.name);
        }
      });
    }, 10);
    return async () => {
      clearInterval(timer);
      await settle(() => this.inFlight === 0, 15_000);
    };
  }

  private async publishOne(topic: string): Promise<boolean> {
    const record = this.log.start(topic, this.gen, this.phase);
    this.inFlight++;
    try {
      const seq = await this.publisher!.call('topic.publish', [topic, { t: topic, i: record.i }]);
      if (typeof seq !== 'number') throw new Error(`topic.publish answered ${JSON.stringify(seq)}`);
      this.log.accept(record, seq);
      return true;
    } catch (err) {
      const { code, message } = err as { code?: unknown; message?: unknown };
      const why = typeof message === 'string' ? message : String(err);
      this.log.reject(record, typeof code === 'number' ? `${code} ${why}` : why);
      return false;
    } finally {
      this.inFlight--;
    }
  }

  /** One last accepted message per topic, and every subscription given time to receive it. */
  private async finalMarkers(): Promise<void> {
    const markers = new Map<string, number>();
    await waitFor(async () => {
      for (const topic of this.topics) {
        if (!markers.has(topic.name) && (await this.publishOne(topic.name))) {
          markers.set(topic.name, this.log.all(topic.name).at(-1)!.i);
        }
      }
      return markers.size === this.topics.length;
    }, 'a final publish on every topic to be accepted');
    const has = (sub: Recorded): boolean => {
      const i = markers.get(sub.topic);
      return sub.events.some((e) => (e.data as { i?: number } | undefined)?.i === i);
    };
    const all: Recorded[] = [...this.subscribers, ...this.rawLive()];
    if (!(await settle(() => all.every(has), FINAL_DEADLINE_MS))) {
      const missing = all.filter((sub) => !has(sub));
      this.say(`final messages not received by ${missing.map(name).join(', ')}`);
    }
  }

  // --- faults --------------------------------------------------------------------------------

  private fault(scenario: Scenario, node?: string): FaultRecord {
    this.phase = scenario;
    const fault: FaultRecord = {
      scenario,
      at: Date.now(),
      watched: [],
      rawExposed: this.rawLive().map((sub) => sub.label),
      resumeMs: [],
      notes: [],
    };
    if (node !== undefined) fault.node = node;
    this.faults.push(fault);
    return fault;
  }

  /** The failover clients' subscriptions connected to `node` now. */
  private async failoverOn(node: string): Promise<Subscriber[]> {
    const on = await Promise.all(
      this.failover.map(async ({ client, subs }) => {
        const info = (await Promise.race([
          client.call('node.info').catch(() => undefined),
          sleep(2_000),
        ])) as NodeInfo | undefined;
        return info?.name === node ? subs : [];
      }),
    );
    return on.flat();
  }

  private async nodeKill(slot: Slot): Promise<void> {
    if (slot === this.nodeC) await this.endRawWindows(this.rawLive(), `${slot.name} SIGKILLed`);
    const fault = this.fault('node-kill', slot.name);
    const moving = await this.failoverOn(slot.name);
    const killedAt = Date.now();
    await killChild(slot.node.child, 'SIGKILL');
    this.say(
      `node-kill: ${slot.name} SIGKILLed (${moving.length / this.topics.length} failover clients on it, and S@${slot.name})`,
    );
    fault.watched.push(...moving.map((subscriber) => ({ subscriber, from: killedAt })));
    await sleep(NODE_DOWN_MS);
    await this.restart(slot, fault);
    await sleep(SETTLE_MS);
  }

  private async drain(slot: Slot): Promise<void> {
    if (slot === this.nodeC) await this.endRawWindows(this.rawLive(), `${slot.name} drained`);
    const fault = this.fault('drain', slot.name);
    const moving = await this.failoverOn(slot.name);
    const drainedAt = Date.now();
    const exited = new Promise((resolve) => slot.node.child.once('exit', resolve));
    const status = await fetch(`${slot.node.httpUrl}/drain`, {
      method: 'POST',
      signal: AbortSignal.timeout(5_000),
    }).then(
      (response) => response.status,
      () => 0,
    );
    const gone = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
    if (!gone) fault.notes.push(`${slot.name} did not exit within 10 s of the drain (killed)`);
    await killChild(slot.node.child, 'SIGKILL');
    this.say(`drain: ${slot.name} drained (POST /drain ${status}) and exited`);
    fault.watched.push(...moving.map((subscriber) => ({ subscriber, from: drainedAt })));
    await sleep(DRAIN_DOWN_MS);
    await this.restart(slot, fault);
    await sleep(SETTLE_MS);
  }

  /** Start `slot`'s node again on its port; its sticky client comes back to it. */
  private async restart(slot: Slot, fault: FaultRecord): Promise<void> {
    slot.node = await this.cluster.node(slot.name, { port: slot.port, env: slot.env });
    const back = Date.now();
    this.say(`${fault.scenario}: ${slot.name} restarted`);
    fault.watched.push(
      ...(this.sticky.get(slot.name) ?? []).map((subscriber) => ({ subscriber, from: back })),
    );
    await this.probe(fault.scenario, slot);
    if (slot === this.nodeC) await this.openRaw(RAW_KINDS, false);
  }

  private async brokerRestart(): Promise<void> {
    const renumbers = !this.broker.keepsNumbering;
    if (renumbers) {
      // The plain convention cannot be told that the topic is numbered anew.
      const plain = this.rawLive('plain');
      await this.endRawWindows(plain, 'the broker restart renumbers the topic');
      await Promise.all(plain.map((sub) => sub.close()));
    }
    const fault = this.fault('broker-restart');
    await this.broker.kill();
    // Publishes started from now on can only reach the restarted broker.
    if (!this.broker.keepsNumbering) this.gen++;
    this.say(`broker-restart: ${this.options.broker} SIGKILLed`);
    await sleep(BROKER_DOWN_MS);
    await this.broker.start();
    const back = Date.now();
    fault.watched.push(...this.subscribers.map((subscriber) => ({ subscriber, from: back })));
    await this.allReady(fault, back);
    this.say(`broker-restart: ${this.options.broker} back; nodes ready`);
    if (renumbers) await this.openRaw(['plain'], false);
    const firstPublish = await this.firstAcceptedAfter(back);
    fault.notes.push(
      `broker back -> first accepted publish: ${firstPublish === undefined ? 'none' : `${firstPublish} ms`}`,
    );
    await sleep(SETTLE_MS);
  }

  private async partition(): Promise<void> {
    const slot = this.slots[2]!; // C: the node behind the relay
    const fault = this.fault('partition', slot.name);
    const cutOff: Recorded[] = [
      ...(await this.failoverOn(slot.name)),
      ...(this.sticky.get(slot.name) ?? []),
      ...this.rawLive(),
    ];
    const shortest = this.topics.reduce((a, b) => (b.history < a.history ? b : a));
    const history = shortest.history;
    const perTopic = this.rate / this.topics.length;
    // Long enough that more than the shortest history is published meanwhile (1.5 times it).
    const holdMs = Math.max(3_000, Math.ceil(((history * 1.5) / perTopic) * 1_000));
    const published = (): number => this.log.acceptedOf(shortest.name).length;
    const before = published();
    await this.relay.cut();
    this.say(`partition: ${slot.name} cut from the broker for ${holdMs} ms`);
    await waitFor(
      async () => (await httpGet(`${slot.node.httpUrl}/readyz`)).status === 503,
      `${slot.name} to notice the cut (/readyz 503)`,
    );
    await sleep(holdMs);
    await this.relay.restore();
    const restored = Date.now();
    fault.notes.push(
      `${published() - before} messages accepted on ${shortest.name} during the cut (history ${history})`,
    );
    fault.watched.push(...cutOff.map((subscriber) => ({ subscriber, from: restored })));
    await waitFor(
      async () => (await httpGet(`${slot.node.httpUrl}/readyz`)).status === 200,
      `${slot.name} ready again after the cut`,
    );
    this.say(`partition: link restored; ${slot.name} ready`);
    await this.probe('partition', slot);
    await sleep(SETTLE_MS);
  }

  private async allReady(fault: FaultRecord, since: number): Promise<void> {
    await Promise.all(
      this.slots.map(async (slot) => {
        await waitFor(
          async () => (await httpGet(`${slot.node.httpUrl}/readyz`)).status === 200,
          `${slot.name} ready after the broker restart`,
        );
        fault.notes.push(`${slot.name} ready ${Date.now() - since} ms after the broker was back`);
      }),
    );
  }

  private async firstAcceptedAfter(since: number): Promise<number | undefined> {
    let first: number | undefined;
    await settle(() => {
      const records = this.topics.flatMap((t) => this.log.acceptedOf(t.name));
      const after = records.filter((r) => r.startedAt >= since).map((r) => r.startedAt);
      if (after.length > 0) first = Math.min(...after) - since;
      return first !== undefined;
    }, 10_000);
    return first;
  }

  /** A fresh client on `slot`'s URL alone must receive a message on the first topic. */
  private async probe(scenario: Scenario, slot: Slot): Promise<void> {
    const started = Date.now();
    const client = this.client([slot.node.url]);
    const events: SubscriptionEvent<unknown>[] = [];
    const subscription = client
      .subscribeWithMeta(this.topics[0]!.name)
      .subscribe((event) => events.push(event));
    const probe: Probe = { scenario, node: slot.name, ok: false, ms: 0 };
    try {
      await waitFor(
        () => events.some((e) => e.gap === undefined),
        `a message for a new client on ${slot.name}`,
        PROBE_DEADLINE_MS,
      );
      probe.ok = true;
    } catch (err) {
      probe.error = err instanceof Error ? err.message : String(err);
    } finally {
      probe.ms = Date.now() - started;
      subscription.unsubscribe();
      await Promise.race([client.close(), sleep(2_000)]);
    }
    this.probes.push(probe);
  }

  // --- accounting ----------------------------------------------------------------------------

  /** The part of the run a raw subscriber is owed (see the top of this file). */
  private rawWindow(sub: RawSubscriber): AccountWindow {
    let seq = sub.position?.seq;
    if (seq === undefined) {
      // No position: after every publish that started before its subscribe reply arrived.
      seq = 0;
      for (const record of this.log.acceptedOf(sub.topic)) {
        if (record.gen === sub.gen && record.startedAt < sub.subscribedAt) {
          seq = Math.max(seq, record.seq!);
        }
      }
    }
    const window: AccountWindow = { after: { gen: sub.gen, seq } };
    // A socket that closed inside its window is a problem of its own (reported on close);
    // what it was owed after its last message is not claimed as lost on top of it.
    // (The run is not over yet when this is read: any close was during it.)
    const upTo =
      sub.upTo ??
      (sub.closedAt === undefined
        ? undefined
        : (sub.lastMessage((data) => this.log.recordOf(sub.topic, data)?.gen) ?? window.after));
    if (upTo !== undefined) window.upTo = upTo;
    return window;
  }

  private account(): ChaosResult {
    const broker = this.options.broker;
    this.accounted = true;
    const accounts = this.subscribers.map((sub) =>
      accountSubscription(
        sub.label,
        sub.topic,
        sub.events.map((event, k) => ({ ...event, at: sub.times[k]! })),
        this.log,
      ),
    );
    const rawAccounts = this.raw.map((sub) =>
      accountSubscription(sub.label, sub.topic, sub.events, this.log, this.rawWindow(sub)),
    );
    const rows = rowsByScenario(broker, SCENARIOS, this.log, [...accounts, ...rawAccounts]);
    const rawRows = rowsByScenario(broker, SCENARIOS, this.log, rawAccounts, [this.rawTopic]);
    for (const fault of this.faults) {
      const row = rows.get(fault.scenario)!;
      const rawRow = rawRows.get(fault.scenario)!;
      row.faults++;
      if (fault.rawExposed.length > 0) rawRow.faults++;
      for (const { subscriber, from } of fault.watched) {
        const ms = resumeTime(subscriber, from, this.log);
        if (ms === undefined) {
          this.problems.push(
            `${name(subscriber)}: no new message after ${fault.scenario}${fault.node ? ` ${fault.node}` : ''} ended`,
          );
        } else {
          fault.resumeMs.push(ms);
          if (subscriber instanceof RawSubscriber) rawRow.resumeMs.push(ms);
        }
      }
      row.resumeMs.push(...fault.resumeMs);
    }
    const ordered = SCENARIOS.map((s) => rows.get(s)!);
    const total = totalRow('all', broker, ordered);
    const rawOrdered = SCENARIOS.map((s) => ({ ...rawRows.get(s)!, scenario: `raw ${s}` }));
    const rawOut = [...rawOrdered, totalRow('raw all', broker, rawOrdered)];

    const details: string[] = [];
    for (const account of [...accounts, ...rawAccounts]) {
      const where = `${account.label}/${account.topic}`;
      for (const outcome of ['lost', 'reordered'] as const) {
        const ranges = seqRanges(account, outcome);
        if (ranges)
          details.push(
            `${where}: ${outcome === 'lost' ? 'SILENTLY LOST' : 'reordered'} seqs ${ranges}`,
          );
      }
      if (account.duplicates.length > 0) {
        details.push(
          `${where}: ${account.duplicates.length} duplicates, seqs ${account.duplicates.map((r) => r.seq ?? `#${r.i}`).join(',')}`,
        );
      }
    }
    const problems = [
      ...this.problems,
      ...this.log.conflicts,
      ...[...accounts, ...rawAccounts].flatMap((a) => a.problems),
      ...this.raw.flatMap((sub) => sub.problems),
      ...this.subscribers.flatMap((sub) =>
        sub.errors.map((err) => `${name(sub)}: subscription error ${String(err)}`),
      ),
      ...this.probes
        .filter((p) => !p.ok)
        .map((p) => `a new client on ${p.node} after ${p.scenario} got no message: ${p.error}`),
    ];
    for (const scenario of SCENARIOS.slice(1)) {
      if (rows.get(scenario)!.faults === 0) problems.push(`${scenario} was never injected`);
    }
    const rejected = new Map<string, number>();
    for (const topic of this.topics) {
      for (const r of this.log.all(topic.name)) {
        if (r.error !== undefined) rejected.set(r.error, (rejected.get(r.error) ?? 0) + 1);
      }
    }
    const notes = [
      `code: ${describeCode()}`,
      `topics: ${this.topics.map((t) => `${t.name} (history ${t.history})`).join(', ')}; ` +
        `${this.subscribers.length} subscriptions (${this.failover.length} failover and ${this.slots.length} sticky clients on every topic, ` +
        `${this.slots.length} replayers on ${this.topics.reduce((a, b) => (b.history > a.history ? b : a)).name}); ` +
        `publisher ${this.rate}/s; client backoff ${100}..${this.backoffCapMs} ms; ` +
        `sticky clients and replayers busy ${this.options.stallMs ?? 150} ms after each reconnect`,
      `raw-protocol subscribers on ${this.nodeC.name} (plain ws, ${this.rawTopic}, never reconnect): ` +
        this.raw
          .map((sub, k) => {
            const w = rawAccounts[k]!.window!;
            const point = (p: { gen: number; seq: number }): string =>
              `${p.gen > 0 ? `g${p.gen}:` : ''}${p.seq}`;
            const until =
              w.upTo === undefined
                ? 'the end'
                : `${point(w.upTo)} (${sub.endedBecause ?? 'socket closed'})`;
            const told = rawAccounts[k]!;
            return (
              `${sub.label} owed the seqs after ${point(w.after)} up to ${until}: ` +
              `${told.countedGaps} counted and ${told.unknownGaps} unknown gap signals, ` +
              `${sub.events.reduce((n, e) => n + (e.missed ?? 0), 0)} missed, ` +
              `${sub.epochNotices} epoch notices, ${sub.reconnectRequests} rpc.reconnect, ` +
              `${sub.pingsAnswered} rpc.ping answered` +
              (sub.closeCode === undefined ? '' : `, closed ${sub.closeCode}`)
            );
          })
          .join('; '),
      `gap signals received (RpcClient subscriptions): ${sum(accounts, (a) => a.countedGaps)} counted, ${sum(accounts, (a) => a.unknownGaps)} unknown; ` +
        `messages received whose publish was rejected (stored anyway): ${sum(accounts, (a) => a.unacknowledged)}`,
      `publishes rejected: ${[...rejected].map(([why, n]) => `${n} x ${why}`).join('; ') || 'none'}` +
        (this.skippedTicks > 0
          ? `; ${this.skippedTicks} not sent (${MAX_IN_FLIGHT} in flight)`
          : ''),
      ...this.faults.map(
        (f) =>
          `${f.scenario}${f.node ? ` ${f.node}` : ''}: resume ${f.resumeMs.length ? `median ${median(f.resumeMs)} / max ${Math.max(...f.resumeMs)} ms over ${f.resumeMs.length} subscriptions` : '-'}` +
          (f.notes.length ? `; ${f.notes.join('; ')}` : ''),
      ),
      `new clients on restarted or reconnected nodes: ${this.probes.map((p) => `${p.node} after ${p.scenario}: ${p.ok ? `message in ${p.ms} ms` : 'NONE'}`).join('; ')}`,
    ];
    const rowsOut = [...ordered, total];
    return {
      broker,
      rows: rowsOut,
      rawRows: rawOut,
      table:
        `${formatTable(rowsOut, this.backoffCapMs)}\n` +
        `raw-protocol subscribers on ${this.nodeC.name} alone (included above):\n` +
        formatTable(rawOut, this.backoffCapMs),
      backoffCapMs: this.backoffCapMs,
      faults: this.faults,
      probes: this.probes,
      accounts: [...accounts, ...rawAccounts],
      violations: total.lost + total.duplicates + total.reordered,
      details,
      problems,
      notes,
      elapsedMs: Date.now() - this.start,
    };
  }
}

function name(sub: Recorded): string {
  return `${sub.label}/${sub.topic}`;
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  return items.reduce((total, item) => total + of(item), 0);
}

/**
 * How long after `from` the subscription received its first message published at or after
 * `from` (what was published before, replayed or not, does not count: that is catching up).
 */
function resumeTime(sub: Recorded, from: number, log: PublishLog): number | undefined {
  // Arrival times only grow: start at the first event at or after `from`.
  let low = 0;
  for (let high = sub.times.length; low < high;) {
    const mid = (low + high) >>> 1;
    if (sub.times[mid]! < from) low = mid + 1;
    else high = mid;
  }
  for (let k = low; k < sub.events.length; k++) {
    if (sub.events[k]!.gap !== undefined) continue;
    const record = log.recordOf(sub.topic, sub.events[k]!.data);
    if (record && record.startedAt >= from) return sub.times[k]! - from;
  }
  return undefined;
}

/** The table, then what it rests on, then every violation and problem found. */
export function formatReport(result: ChaosResult): string {
  const lines = [
    `chaos on ${result.broker}: ${(result.elapsedMs / 1000).toFixed(0)} s, ${result.faults.length} faults`,
    result.table,
    ...result.notes.map((note) => `  ${note}`),
  ];
  const shown = 40;
  if (result.details.length > 0) {
    lines.push(`violations (${result.violations}):`);
    lines.push(...result.details.slice(0, shown).map((d) => `  ${d}`));
    if (result.details.length > shown) lines.push(`  ... ${result.details.length - shown} more`);
  }
  if (result.problems.length > 0) {
    lines.push(`problems (${result.problems.length}):`);
    lines.push(...result.problems.slice(0, shown).map((p) => `  ${p}`));
    if (result.problems.length > shown) lines.push(`  ... ${result.problems.length - shown} more`);
  }
  if (result.violations === 0 && result.problems.length === 0) {
    lines.push(
      'verdict: every accepted message delivered exactly once in order, or covered by a signal',
    );
  } else
    lines.push(
      `verdict: FAILED (${result.violations} violations, ${result.problems.length} problems)`,
    );
  return lines.join('\n');
}
