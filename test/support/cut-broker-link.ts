/**
 * Two gateway nodes in this process on a private redis-server or nats-server (JetStream),
 * started on a free port so that no other test shares its keys or streams: node A on the broker,
 * node B through a TCP relay the test cuts and restores. What is published while B is cut off
 * never reaches B; B's broker calls fail until its link is back.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { BrokerKind } from './brokers.js';
import { canConnect, freePort } from './network.js';
import { killChild } from './processes.js';
import { Resources } from './resources.js';
import { hasProgram } from './server-processes.js';
import { TcpRelay } from './tcp-relay.js';
import { waitUntil } from './waiting.js';

/** On CI a missing server program fails the tests instead of skipping them. */
const mustRun = process.env['CI'] === 'true';
const programs: Record<BrokerKind, boolean> = {
  redis: hasProgram('redis-server'),
  nats: hasProgram('nats-server'),
};

export class CutLinkNodes<C> {
  /** The gateways and sockets of one test, closed by `cleanup()`. */
  readonly res = new Resources();
  private readonly brokers: Broker[] = [];
  private readonly relays: TcpRelay[] = [];
  private readonly servers: ChildProcess[] = [];
  private readonly dirs: string[] = [];
  private readonly ports: Partial<Record<BrokerKind, number>> = {};

  /**
   * `prefixStem` starts each test's broker prefix (a random part follows); `options` are a
   * node's gateway options on `broker`.
   */
  constructor(
    private readonly prefixStem: string,
    private readonly options: (broker: Broker) => GatewayOptions<C>,
  ) {}

  /**
   * One `describe` a broker kind, named `title (kind)`: skipped, with a note in the name, where
   * the server program is missing (but on CI); the private server is started before its tests.
   */
  describeEachBroker(title: string, body: (kind: BrokerKind) => void): void {
    for (const kind of ['redis', 'nats'] as const) {
      const available = programs[kind];
      describe.skipIf(!available && !mustRun)(
        available ? `${title} (${kind})` : `${title} (${kind}; no ${kind} server)`,
        () => {
          beforeAll(async () => {
            this.ports[kind] = await this.startServer(kind);
          });
          body(kind);
        },
      );
    }
  }

  /** Node A on the broker, node B through a relay the test cuts. */
  async twoNodes(kind: BrokerKind) {
    const { a, brokerB, relay } = await this.nodeAndLink(kind);
    const b = await this.res.gateway(this.options(brokerB));
    return { a, b, brokerB, relay };
  }

  /**
   * As twoNodes, but node B starts listening with its link already cut (a node started during
   * a broker outage); the test restores the relay.
   */
  async twoNodesBStartedCut(kind: BrokerKind) {
    const { a, brokerB, relay } = await this.nodeAndLink(kind);
    await relay.cut();
    await waitUntil(() => !brokerB.ready, "node B's broker to see its link cut");
    const b = await this.res.gateway(this.options(brokerB));
    return { a, b, brokerB, relay };
  }

  /** Node A listening on the broker, and node B's broker through a relay (B not made yet). */
  private async nodeAndLink(kind: BrokerKind) {
    const port = this.ports[kind]!;
    const prefix = `${this.prefixStem}${randomBytes(5).toString('hex')}`;
    const relay = new TcpRelay(port);
    this.relays.push(relay);
    const relayed = await relay.start();
    const brokerB = await this.newBroker(kind, prefix, relayed);
    const a = await this.res.gateway(this.options(await this.newBroker(kind, prefix, port)));
    return { a, brokerB, relay };
  }

  /** For afterEach: the test's gateways, brokers and relays. */
  async cleanup(): Promise<void> {
    await this.res.cleanup();
    await Promise.all(this.brokers.splice(0).map((broker) => broker.close()));
    await Promise.all(this.relays.splice(0).map((relay) => relay.cut()));
  }

  /** For afterAll: the private servers and their directories. */
  async stop(): Promise<void> {
    await Promise.all(this.servers.splice(0).map((child) => killChild(child)));
    await Promise.all(this.dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  }

  /** A private redis-server or nats-server (JetStream) on a free port. */
  private async startServer(kind: BrokerKind): Promise<number> {
    const port = await freePort();
    let child: ChildProcess;
    if (kind === 'redis') {
      const args = [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
      ];
      child = spawn('redis-server', args, { stdio: 'ignore' });
    } else {
      const dir = await mkdtemp(join(tmpdir(), `wsrpc-${this.prefixStem}-nats-`));
      this.dirs.push(dir);
      child = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir], {
        stdio: 'ignore',
      });
    }
    this.servers.push(child);
    await waitUntil(
      async () => child.exitCode !== null || (await canConnect(port)),
      `${kind} to listen`,
      15_000,
      20,
    );
    if (child.exitCode !== null) throw new Error(`${kind} server exited with ${child.exitCode}`);
    return port;
  }

  private async newBroker(kind: BrokerKind, prefix: string, port: number): Promise<Broker> {
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: `redis://127.0.0.1:${port}`, prefix: `${prefix}:` })
        : await NatsBroker.connect({
            servers: `nats://127.0.0.1:${port}`,
            prefix,
            timeoutMs: 2_000,
            reconnectWaitMs: 50,
          });
    this.brokers.push(broker);
    return broker;
  }
}
