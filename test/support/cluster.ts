import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import type { ClientOptions } from '../../src/client/client.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import { managers } from '../../src/client/subscriptions.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { canonicalJson } from '../../src/client/canonical-json.js';
import { NATS_URL, REDIS_URL, deleteNatsStreams, deleteRedisKeys } from './brokers.js';
import type { BrokerKind } from './brokers.js';
import { bundleForNode } from './bundle.js';
import { root } from './environment.js';
import { httpGet } from './network.js';
import { sleep } from './promises.js';
import { killChild } from './processes.js';
import { waitFor } from './waiting.js';

/**
 * Bundle test/cluster/node.ts with the current src/ into a temporary directory (esbuild, a
 * dev dependency; no type check, which `tsc --noEmit` does). Packages stay external and are
 * found through a node_modules symlink. dist/ is neither read nor written, so a stale or
 * half-rebuilt dist cannot affect these tests, nor these tests the ones that spawn dist.
 */
export function buildNodeScript(): Promise<{ script: string; dir: string }> {
  return bundleForNode('test/cluster/node.ts', { sourcemap: 'inline' });
}

/** One gateway child process. */
export interface GatewayNode {
  name: string;
  port: number;
  url: string;
  httpUrl: string;
  child: ChildProcess;
  output: () => string;
}

/** What GET /info of a node answers (see node.ts). */
export interface NodeInfo {
  name: string;
  pid: number;
  subscribers: number;
  ready: boolean;
  brokerReady: boolean;
  /** Local subscribers by topic (every topic held). */
  topics?: Record<string, number>;
}

/** One subscribeWithMeta('feed') of a client, every event recorded. */
export class Subscriber {
  readonly events: SubscriptionEvent<unknown>[] = [];
  /** When each event arrived (Date.now()), index for index with `events`. */
  readonly times: number[] = [];
  readonly errors: unknown[] = [];
  readonly states: ConnectionState[] = [];

  constructor(
    readonly label: string,
    readonly client: RpcClient,
    readonly topic = 'feed',
  ) {
    client.state$.subscribe((state) => {
      if (this.states.at(-1) !== state) this.states.push(state);
    });
    client.subscribeWithMeta(topic).subscribe({
      next: (event) => {
        this.events.push(event);
        this.times.push(Date.now());
      },
      error: (err: unknown) => this.errors.push(err),
    });
  }

  /**
   * The client knows where its subscription starts (the position the server gave it, or a
   * message's seq): a resume from here can ask for what it missed. Before it, a lost
   * connection can only be told as a gap of unknown size.
   */
  knowsItsStart(): boolean {
    return (
      managers.get(this.client)?.shared.get(canonicalJson([this.topic]))?.lastSeq !== undefined
    );
  }

  /** Messages received (gap signals left out). */
  get messages(): SubscriptionEvent<unknown>[] {
    return this.events.filter((event) => event.gap === undefined);
  }

  /** The node this client is connected to now. */
  async node(): Promise<string> {
    return ((await this.client.call('node.info')) as NodeInfo).name;
  }
}

export type Expected = { seq: number; data: unknown } | { gap: number | null };

function show(value: unknown): string {
  return JSON.stringify(value) ?? 'undefined';
}

/**
 * Compare what a subscriber got with what it should have, event by event (seq and payload,
 * or a gap signal). Undefined when equal; otherwise where it first differs, readably.
 */
export function sequenceProblem(
  events: readonly SubscriptionEvent<unknown>[],
  expected: readonly Expected[],
): string | undefined {
  const got: Expected[] = events.map((event) =>
    event.gap !== undefined ? { gap: event.gap } : { seq: event.seq ?? NaN, data: event.data },
  );
  const length = Math.max(got.length, expected.length);
  for (let i = 0; i < length; i++) {
    if (show(got[i]) !== show(expected[i])) {
      const seqs = got.map((event) => ('gap' in event ? `gap:${event.gap}` : event.seq));
      return (
        `got ${got.length} events, expected ${expected.length}; first difference at #${i}: ` +
        `got ${show(got[i])}, expected ${show(expected[i])}; seqs received: ` +
        compactSeqs(seqs)
      );
    }
  }
  return undefined;
}

/** `1-57,59,61-300`: runs of consecutive numbers collapsed. */
function compactSeqs(seqs: readonly (number | string)[]): string {
  const parts: string[] = [];
  let start: number | undefined;
  let prev: number | undefined;
  const flush = (): void => {
    if (start === undefined) return;
    parts.push(start === prev ? `${start}` : `${start}-${prev}`);
    start = prev = undefined;
  };
  for (const seq of seqs) {
    if (typeof seq === 'number' && prev !== undefined && seq === prev + 1) {
      prev = seq;
      continue;
    }
    flush();
    if (typeof seq === 'number') start = prev = seq;
    else parts.push(seq);
  }
  flush();
  return parts.join(',');
}

export interface NodeOptions {
  /** Port to listen on; default: any free one (the node reports it). */
  port?: number;
  /** History maxLength of the `feed` topic. */
  history?: number;
  /** Replaces the broker settings of the cluster (REDIS_URL of a private redis-server...). */
  env?: Record<string, string>;
}

/**
 * Everything one test starts: gateway processes on one broker under a random prefix, other
 * child processes (redis-server, nginx), clients and temporary directories. `cleanup()`
 * (afterEach) closes the clients, SIGKILLs every child still running, removes the broker's
 * keys or streams under the prefix and the directories.
 */
export class Cluster {
  /** Valid as a Redis key prefix and as a NATS stream name prefix. */
  readonly prefix = `wsrpccl_${randomBytes(5).toString('hex')}`;
  readonly nodes: GatewayNode[] = [];
  private readonly children: {
    child: ChildProcess;
    name: string;
    output: () => string;
    stopSignal: NodeJS.Signals;
  }[] = [];
  private readonly clients: RpcClient[] = [];
  private readonly dirs: string[] = [];
  private readonly redisUrls = new Set<string>();
  private readonly deferred: (() => unknown)[] = [];
  /** Every child's name and output, kept after cleanup for the failure report. */
  private readonly logs: { name: string; output: () => string }[] = [];

  constructor(
    private readonly script: string,
    readonly broker: BrokerKind,
  ) {
    if (broker === 'redis') this.redisUrls.add(REDIS_URL);
  }

  /** Start a gateway node and wait until it listens and its broker is connected (/readyz 200). */
  async node(name: string, options: NodeOptions = {}): Promise<GatewayNode> {
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      PORT: String(options.port ?? 0),
      HOST: '127.0.0.1',
      NODE_NAME: name,
      HISTORY: String(options.history ?? 1_000),
      LOG_LEVEL: 'warn',
      BROKER: this.broker,
      BROKER_PREFIX: this.prefix,
      REDIS_URL,
      NATS_URL,
      ...options.env,
    };
    if (env['BROKER'] === 'redis') this.redisUrls.add(env['REDIS_URL']!);
    const child = spawn(process.execPath, [this.script], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = this.track(child, `gateway ${name}`);
    const port = await new Promise<number>((resolve, reject) => {
      let buffered = '';
      const onData = (chunk: Buffer): void => {
        buffered += chunk.toString();
        const match = /\{"listening":(\d+)\}/.exec(buffered);
        if (!match) return;
        child.stdout!.off('data', onData);
        child.off('exit', onExit);
        resolve(Number(match[1]));
      };
      const onExit = (code: number | null, signal: string | null): void =>
        reject(
          new Error(`gateway ${name} exited (${code ?? signal}) before listening:\n${output()}`),
        );
      child.stdout!.on('data', onData);
      child.once('exit', onExit);
    });
    const node: GatewayNode = {
      name,
      port,
      url: `ws://127.0.0.1:${port}/rpc`,
      httpUrl: `http://127.0.0.1:${port}`,
      child,
      output,
    };
    this.nodes.push(node);
    await waitFor(
      async () => (await httpGet(`${node.httpUrl}/readyz`)).status === 200,
      `gateway ${name} to be ready`,
    );
    return node;
  }

  /**
   * Keep a child's output (for failure reports) and stop it in cleanup: with `stopSignal`
   * (SIGKILL by default; nginx gets SIGTERM so its master takes its workers along), then
   * SIGKILL if it is still there after a grace period.
   */
  track(child: ChildProcess, name: string, stopSignal: NodeJS.Signals = 'SIGKILL'): () => string {
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-1_500);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const read = (): string => output;
    this.children.push({ child, name, output: read, stopSignal });
    this.logs.push({ name, output: read });
    return read;
  }

  /** A Node client on `urls` (it moves to the next one when one fails), reconnecting fast. */
  client(urls: string | string[], options: Partial<ClientOptions> = {}): RpcClient {
    const client = new RpcClient({
      url: urls,
      WebSocket,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      callTimeoutMs: 10_000,
      ...options,
    });
    this.clients.push(client);
    return client;
  }

  subscriber(label: string, urls: string | string[]): Subscriber {
    return new Subscriber(label, this.client(urls));
  }

  /** A directory removed in cleanup. */
  tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'wsrpc-cluster-'));
    this.dirs.push(dir);
    return dir;
  }

  /** Also clean this Redis's keys under the prefix (a private redis-server). */
  usesRedis(url: string): void {
    this.redisUrls.add(url);
  }

  async info(node: GatewayNode): Promise<NodeInfo> {
    const { status, body } = await httpGet(`${node.httpUrl}/info`);
    if (status !== 200) throw new Error(`GET /info of ${node.name}: ${status}`);
    return JSON.parse(body) as NodeInfo;
  }

  /** Wait until each node has `count` local subscribers of `feed`. */
  async subscribersOn(nodes: readonly GatewayNode[], count: number): Promise<void> {
    const counts: Record<string, number> = {};
    await waitFor(
      async () => {
        for (const node of nodes) counts[node.name] = (await this.info(node)).subscribers;
        return nodes.every((node) => counts[node.name] === count);
      },
      () => `${count} feed subscribers on each node, have ${JSON.stringify(counts)}`,
    );
  }

  /** Run `fn` first thing in cleanup (close a raw socket...). */
  defer(fn: () => unknown): void {
    this.deferred.push(fn);
  }

  /** Outputs of every child, for a failure report. */
  outputs(): string {
    return this.logs
      .map(({ name, output }) => `--- ${name} ---\n${output().trim() || '(no output)'}`)
      .join('\n');
  }

  async cleanup(): Promise<void> {
    for (const fn of this.deferred.splice(0)) {
      try {
        await fn();
      } catch {
        // Cleaning up regardless.
      }
    }
    await Promise.all(
      this.clients.splice(0).map((client) => Promise.race([client.close(), sleep(2_000)])),
    );
    await Promise.all(
      this.children.splice(0).map(({ child, stopSignal }) => killChild(child, stopSignal)),
    );
    this.nodes.splice(0);
    if (this.broker === 'nats') await deleteNatsStreams(this.prefix).catch(() => undefined);
    for (const url of this.redisUrls) await deleteRedisKeys(url, this.prefix).catch(() => 0);
    for (const dir of this.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  }
}
