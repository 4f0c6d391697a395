import { rmSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGateway } from '../../src/index.js';
import type { Gateway, UserPresenceChange } from '../../src/index.js';
import { silentLogger } from '../../src/peer/logger.js';
import { LIFECYCLE_TOPIC } from '../../src/server/lifecycle.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { NATS_URL, REDIS_URL, brokersUp } from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import { bundleForNode } from '../support/bundle.js';
import { Cluster } from '../support/cluster.js';
import { killChild } from '../support/processes.js';
import { sleep } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
/** The killed node's lease (lifecycle-node.ts's LEASE_MS); the in-process nodes use the same. */
const LEASE_MS = 1_500;

let built: { script: string; dir: string };
beforeAll(async () => {
  built = await bundleForNode('test/cluster/lifecycle-node.ts');
});
afterAll(() => rmSync(built.dir, { recursive: true, force: true }));

const res = new Resources();
const brokers: Broker[] = [];
let cluster: Cluster | undefined;
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
  await cluster?.cleanup();
  cluster = undefined;
});

/** A node in this process, on the cluster's broker (as brokerFromEnv names its keys). */
async function localNode(kind: BrokerKind, prefix: string, leaseMs = LEASE_MS) {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: NATS_URL, prefix });
  brokers.push(broker);
  // The node's heartbeats (one per check of the other nodes' leases, right after it) and its
  // users going offline, in order.
  const log: string[] = [];
  const publish = broker.publish.bind(broker);
  broker.publish = (...args: Parameters<Broker['publish']>) => {
    const [topic, payload] = args;
    if (topic === LIFECYCLE_TOPIC && (JSON.parse(payload) as { k: string }).k === 'h') {
      log.push('heartbeat');
    }
    return publish(...args);
  };
  const gateway = createGateway<{ user?: string }>({
    logger: silentLogger,
    broker,
    clusterEvents: { leaseMs, flushMs: 50 },
    authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
    userOf: (context) => context.user,
  });
  res.gateways.push(gateway);
  const { port } = await gateway.listen(0);
  const offline: (UserPresenceChange & { at: number })[] = [];
  const online: UserPresenceChange[] = [];
  gateway.userOffline$.subscribe((change) => {
    offline.push({ ...change, at: Date.now() });
    log.push('offline');
  });
  gateway.userOnline$.subscribe((change) => online.push(change));
  return { gateway, url: `ws://127.0.0.1:${port}/rpc`, offline, online, log };
}

async function connected(url: string, gateway?: Gateway<{ user?: string }>) {
  const client = res.client(url);
  await client.opened();
  if (gateway) await waitUntil(() => gateway.sessions.size > 0, 'the session');
  return client;
}

for (const kind of ['redis', 'nats'] as const) {
  describe.skipIf(!up[kind] && !mustRun)(
    up[kind]
      ? `users online across three nodes (${kind})`
      : `users online across three nodes (${kind}; skipped: no ${kind} on 127.0.0.1)`,
    () => {
      it('a user is offline only once gone from every node, a SIGKILLed node within its lease and a third', async () => {
        cluster = new Cluster(built.script, kind);
        const a = await localNode(kind, cluster.prefix);
        const b = await localNode(kind, cluster.prefix);
        const c = await cluster.node('c', { env: { LEASE_MS: String(LEASE_MS) } });
        const aliceA = await connected(`${a.url}?user=alice`, a.gateway);
        const aliceB = await connected(`${b.url}?user=alice`, b.gateway);
        await connected(`${c.url}?user=alice`);
        await connected(`${c.url}?user=bob`);
        for (const node of [a, b]) {
          await waitUntil(() => node.gateway.isUserOnline('bob'), 'bob (on node C) known');
        }
        expect(a.online.map((change) => change.user).sort()).toEqual(['alice', 'bob']);

        await aliceA.close();
        await aliceB.close();
        // Several windows: every node has heard that A and B lost alice.
        await sleep(400);
        expect(a.gateway.isUserOnline('alice')).toBe(true);
        expect(b.gateway.isUserOnline('alice')).toBe(true);
        expect([...a.offline, ...b.offline]).toEqual([]);

        // The leases are read on a clock that moves only when the test says (the timers are
        // real): node C, last heard at T or before, has a lease that ends by T + LEASE_MS.
        const T = Date.now();
        vi.useFakeTimers({ toFake: ['Date'], now: T });
        try {
          await killChild(c.child);
          const heartbeats = (node: { log: string[] }) =>
            node.log.filter((entry) => entry === 'heartbeat').length;
          // Before the lease's end, checks come and go: nobody goes offline.
          for (const node of [a, b]) {
            const target = heartbeats(node) + 3;
            await waitUntil(() => heartbeats(node) >= target, 'three checks of the leases');
          }
          expect([...a.offline, ...b.offline]).toEqual([]);
          // Past it: each node's first check takes alice and bob offline, before the heartbeat
          // that follows it.
          vi.setSystemTime(T + LEASE_MS + 1);
          for (const node of [a, b]) node.log.push('lapsed');
          for (const node of [a, b]) {
            await waitUntil(() => node.offline.length === 2, 'alice and bob offline');
            const target = heartbeats(node) + 1;
            await waitUntil(() => heartbeats(node) >= target, 'the check after');
            expect(node.offline.map((change) => change.user).sort()).toEqual(['alice', 'bob']);
            const lapsed = node.log.lastIndexOf('lapsed');
            expect(node.log.slice(lapsed + 1, lapsed + 4)).toEqual([
              'offline',
              'offline',
              'heartbeat',
            ]);
          }
        } finally {
          vi.useRealTimers();
        }
        // Once each, and nothing more afterwards.
        await sleep(LEASE_MS / 2);
        expect(a.offline).toHaveLength(2);
        expect(b.offline).toHaveLength(2);
      });

      it("another node's events arrive with its id; a node that closes takes its users offline at once", async () => {
        cluster = new Cluster(built.script, kind);
        // Leases that never lapse within the test: a user going offline is the closing node
        // saying so, never a wait for its lease.
        const a = await localNode(kind, cluster.prefix, 600_000);
        const b = await localNode(kind, cluster.prefix, 600_000);
        const events: string[] = [];
        a.gateway.events$.subscribe((event) => {
          if (event.node === b.gateway.nodeId) events.push(event.type);
        });
        const carol = await connected(`${b.url}?user=carol`, b.gateway);
        await waitUntil(() => a.gateway.isUserOnline('carol'), 'carol known on node A');
        await carol.close();
        await waitUntil(() => events.includes('disconnect'), "node B's disconnect on node A");
        expect(events).toEqual(['connect', 'disconnect']);
        await waitUntil(() => a.offline.length === 1, 'carol offline on node A');
        await connected(`${b.url}?user=dan`, b.gateway);
        await waitUntil(() => a.gateway.isUserOnline('dan'), 'dan known on node A');
        await b.gateway.close({ timeoutMs: 1_000 });
        await waitUntil(() => !a.gateway.isUserOnline('dan'), 'dan offline on node A');
      });
    },
  );
}
