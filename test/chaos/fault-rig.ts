/**
 * What the fault-case tests beside the chaos engine set up alike: a broker process of the test's
 * own (PrivateBroker, which it kills and restarts), broker clients on it (directly or through a
 * relay that can cut them off) that reconnect quickly, gateways (`res`), and their teardown after
 * each test, the last made closed first.
 */
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import type { NatsBrokerOptions } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { BrokerKind } from '../support/brokers.js';
import { Cluster } from '../support/cluster.js';
import { inCi } from '../support/environment.js';
import { Resources } from '../support/resources.js';
import { hasProgram } from '../support/server-processes.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { PrivateBroker } from './private-broker.js';

const PROGRAMS: Record<BrokerKind, string> = { redis: 'redis-server', nats: 'nats-server' };

/** The broker's server program is not installed here (CI installs it: there, never skipped). */
export const missingBroker = (kind: BrokerKind): boolean => !hasProgram(PROGRAMS[kind]) && !inCi;

export class FaultRig {
  readonly res = new Resources();
  private readonly closers: (() => Promise<unknown>)[] = [];
  private cluster: Cluster | undefined;

  /** Run `close` at cleanup, before whatever was given earlier. */
  onCleanup(close: () => Promise<unknown>): void {
    this.closers.push(close);
  }

  /** A started broker process of the test's own, and the cluster that tracks it. */
  async privateBroker(kind: BrokerKind): Promise<{ server: PrivateBroker; cluster: Cluster }> {
    const cluster = (this.cluster = new Cluster('', kind));
    const server = new PrivateBroker(cluster, kind);
    await server.start();
    return { server, cluster };
  }

  /** A relay to `port` (a node linked through it can be cut off), cut at cleanup. */
  async relayTo(port: number): Promise<TcpRelay> {
    const relay = new TcpRelay(port);
    await relay.start();
    this.onCleanup(() => relay.cut());
    return relay;
  }

  /**
   * A broker client of `server` under `prefix`, through `port` (a relay's) or directly,
   * reconnecting quickly after a restart; closed at cleanup.
   */
  async connect(
    server: PrivateBroker,
    prefix: string,
    port = server.port,
    natsOptions: Partial<NatsBrokerOptions> = {},
  ): Promise<Broker> {
    const made =
      server.kind === 'redis'
        ? await RedisBroker.create({
            url: server.url(port),
            prefix: `${prefix}:`,
            reconnectMaxDelayMs: 200,
          })
        : await NatsBroker.connect({
            servers: server.url(port),
            prefix,
            timeoutMs: 2_000,
            reconnectWaitMs: 50,
            ...natsOptions,
          });
    this.onCleanup(() => made.close());
    return made;
  }

  async cleanup(): Promise<void> {
    await this.res.cleanup();
    for (const close of this.closers.splice(0).reverse()) await close().catch(() => undefined);
    await this.cluster?.cleanup();
    this.cluster = undefined;
  }
}
