/**
 * A broker process of the chaos engine's own, on a free loopback port, which the engine kills
 * (SIGKILL) and starts again on the same port:
 *   - redis-server without persistence: it comes back empty, so each topic is numbered anew
 *     (a new epoch; the correct signal to subscribers is an unknown gap, `gap: null`);
 *   - nats-server with JetStream and its own store directory, restarted on the same directory:
 *     streams, and so the numbering, survive.
 * Both are tracked by the cluster, which kills them (and removes the directory) in cleanup.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { freePort } from '../support/network.js';
import { canConnect } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { startRedisServer } from '../support/server-processes.js';
import { waitFor } from '../support/waiting.js';
import type { BrokerKind } from '../support/brokers.js';
import type { Cluster } from '../support/cluster.js';

export class PrivateBroker {
  port = 0;
  private dir = '';
  private child: ChildProcess | undefined;

  constructor(
    private readonly cluster: Cluster,
    readonly kind: BrokerKind,
  ) {}

  /** The broker's directory (NATS: its store; Redis: where it would save), once started. */
  get storeDir(): string {
    return this.dir;
  }

  /** Whether a restart keeps the topics' numbering (NATS file store) or loses it (Redis). */
  get keepsNumbering(): boolean {
    return this.kind === 'nats';
  }

  /** The broker URL for a gateway, directly or through a relay on `port`. */
  url(port = this.port): string {
    return `${this.kind}://127.0.0.1:${port}`;
  }

  /** Start it (the first time on a free port, then on the same port and directory). */
  async start(): Promise<void> {
    if (this.port === 0) {
      this.port = await freePort();
      this.dir = this.cluster.tempDir();
      if (this.kind === 'redis') this.cluster.usesRedis(this.url());
    }
    this.child =
      this.kind === 'redis'
        ? await startRedisServer(this.cluster, this.port, this.dir)
        : await this.startNats();
  }

  /** SIGKILL it; resolves once it is gone. */
  async kill(): Promise<void> {
    if (this.child) await killChild(this.child, 'SIGKILL');
    this.child = undefined;
  }

  private async startNats(): Promise<ChildProcess> {
    const child = spawn(
      'nats-server',
      ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const output = this.cluster.track(child, `nats-server :${this.port}`);
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`nats-server exited:\n${output()}`);
      return (await canConnect(this.port)) && (await this.jetStreamAnswers());
    }, `nats-server with JetStream on ${this.port}`);
    return child;
  }

  private async jetStreamAnswers(): Promise<boolean> {
    try {
      const nc = await connectNats({ servers: this.url(), timeout: 1_000, reconnect: false });
      try {
        await (await jetstreamManager(nc)).getAccountInfo();
        return true;
      } finally {
        await nc.close();
      }
    } catch {
      return false;
    }
  }
}
