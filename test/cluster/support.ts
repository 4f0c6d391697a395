import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { WebSocket } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import type { ClientOptions } from '../../src/client/client.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { bundleForNode } from '../support/bundle.js';
import { canConnect } from '../support/network.js';
import { killChild } from '../support/processes.js';
export { canConnect, killChild };

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const REDIS_URL = 'redis://127.0.0.1:6379';
export const NATS_URL = 'nats://127.0.0.1:4222';
export const inCi = process.env.CI === 'true';

export type BrokerKind = 'redis' | 'nats';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Poll until `condition` holds; the deadline only turns a hang into a readable failure. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 20_000,
): Promise<void> {
  if (await settle(condition, timeoutMs)) return;
  throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
}

/** Poll until `condition` holds or `timeoutMs` passes; says which. The assertions that follow tell what is wrong. */
export async function settle(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

/** GET `url`: status (0 when nothing answered) and body. */
export async function httpGet(url: string): Promise<{ status: number; body: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return { status: response.status, body: await response.text() };
  } catch {
    return { status: 0, body: '' };
  }
}

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
      callTimeout: 10_000,
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

/** Stop a child (if still running) with `signal`, SIGKILL after 3 s, and wait for it to be gone. */

/** Delete every key under `prefix:` (as brokerFromEnv prefixes Redis keys). Returns how many. */
export async function deleteRedisKeys(url: string, prefix: string): Promise<number> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  let deleted = 0;
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) deleted += await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** Run `fn` with a Redis connection. */
export async function withRedis<T>(url: string, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/** Delete every JetStream stream named `<prefix>_...` (as NatsBroker names topic streams). */
export async function deleteNatsStreams(prefix: string): Promise<number> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    const ours: string[] = [];
    for await (const name of jsm.streams.names())
      if (name.startsWith(`${prefix}_`)) ours.push(name);
    await Promise.all(ours.map((name) => jsm.streams.delete(name)));
    return ours.length;
  } finally {
    await nc.close();
  }
}

/** The last sequence number of a JetStream stream. */
export async function natsLastSeq(stream: string): Promise<number> {
  const nc = await connectNats({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    return (await jsm.streams.info(stream)).state.last_seq;
  } finally {
    await nc.close();
  }
}

export function hasProgram(program: string, args = ['--version']): boolean {
  return spawnSync(program, args, { stdio: 'ignore' }).status === 0;
}

/** A redis-server on `port`, without persistence, tracked by `cluster`; resolves once it answers. */
export async function startRedisServer(
  cluster: Cluster,
  port: number,
  dir: string,
): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = cluster.track(child, `redis-server :${port}`);
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${output()}`);
    return (await canConnect(port)) && (await pingRedis(port));
  }, `redis-server on ${port}`);
  return child;
}

async function pingRedis(port: number): Promise<boolean> {
  try {
    return (await withRedis(`redis://127.0.0.1:${port}`, (redis) => redis.ping())) === 'PONG';
  } catch {
    return false;
  }
}

/** The nginx binary: NGINX_BIN, /usr/sbin/nginx or nginx on the PATH. */
export function findNginx(): string | undefined {
  for (const candidate of [process.env['NGINX_BIN'], '/usr/sbin/nginx', 'nginx']) {
    if (candidate && hasProgram(candidate, ['-v'])) return candidate;
  }
  return undefined;
}

/**
 * deploy/nginx.conf (a conf.d file) for gateways on 127.0.0.1: each `server gateway-N:8080`
 * of the upstream becomes `server 127.0.0.1:<ports[N-1]>` and `listen 8080` becomes
 * `listen 127.0.0.1:<listenPort>`. Throws when the file no longer has that shape.
 */
export function renderNginxSite(template: string, ports: readonly number[], listenPort: number) {
  let servers = 0;
  const site = template
    .replace(/^(\s*server\s+)gateway-(\d+):8080\b/gm, (_all, lead: string, n: string) => {
      const port = ports[Number(n) - 1];
      if (port === undefined) throw new Error(`deploy/nginx.conf: no port for gateway-${n}`);
      servers++;
      return `${lead}127.0.0.1:${port}`;
    })
    .replace(/^(\s*listen\s+)8080\s*;/m, `$1127.0.0.1:${listenPort};`);
  if (servers !== ports.length || !site.includes(`listen 127.0.0.1:${listenPort};`)) {
    throw new Error('deploy/nginx.conf: expected upstream servers gateway-N:8080 and listen 8080');
  }
  return site;
}

/** Start nginx in the foreground with `site` inside a minimal main configuration, all files under `dir`. */
export async function startNginx(
  cluster: Cluster,
  bin: string,
  dir: string,
  site: string,
  port: number,
): Promise<ChildProcess> {
  // Workers may run as an unprivileged user (when started as root): they must reach the temp dirs.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const built = spawnSync(bin, ['-V'], { encoding: 'utf8' }).stderr;
  const tempPaths = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .filter((kind) => kind === 'client_body' || !built.includes(`--without-http_${kind}_module`))
    .map((kind) => `  ${kind}_temp_path ${join(dir, kind)};`)
    .join('\n');
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `events {}\nhttp {\n  access_log ${join(dir, 'logs/access.log')};\n${tempPaths}\n${site}\n}\n`,
  );
  const errorLog = join(dir, 'logs/error.log');
  const child = spawn(
    bin,
    [
      '-p',
      dir,
      '-c',
      conf,
      '-e',
      errorLog,
      '-g',
      `daemon off; worker_processes 1; pid ${join(dir, 'nginx.pid')}; error_log ${errorLog};`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = cluster.track(child, 'nginx', 'SIGTERM');
  await waitFor(async () => {
    if (child.exitCode !== null) {
      const log = existsSync(errorLog) ? spawnSync('tail', ['-n', '20', errorLog]).stdout : '';
      throw new Error(`nginx exited (${child.exitCode}):\n${output()}\n${String(log)}`);
    }
    return canConnect(port);
  }, `nginx on ${port}`);
  return child;
}

/**
 * A TCP relay from 127.0.0.1:`port` (any free one) to 127.0.0.1:`targetPort`, to cut one
 * process off from a server while others keep it: `cut()` drops every relayed connection
 * and refuses new ones, `restore()` listens again on the same port.
 */
export class TcpRelay {
  port = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly targetPort: number) {}

  async start(): Promise<number> {
    const server = createServer((inbound) => {
      const outbound = connect({ host: '127.0.0.1', port: this.targetPort });
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => {
          this.sockets.delete(socket);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
    return this.port;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server
      ? new Promise<void>((resolve) => server.close(() => resolve()))
      : Promise.resolve();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  restore(): Promise<number> {
    return this.start();
  }
}
