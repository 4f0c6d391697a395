/**
 * User inboxes across nodes on Redis and NATS: two gateways in this process, each with its own
 * broker connection under one random prefix, and a third connection that keeps sending to the
 * user. The user's client (`inbox: true`) moves from node A to node B when A goes away, and
 * gets every message exactly once, in order: those sent while it moved come from history.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { InboxGap } from '../../src/client/inbox.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { canConnect } from '../support/network.js';
import { NATS_URL, REDIS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers: Broker[] = [];
const prefixes: { kind: Kind; prefix: string }[] = [];

type Kind = 'redis' | 'nats';

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});

afterAll(async () => {
  for (const { kind, prefix } of prefixes.splice(0)) {
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
    else await deleteNatsStreams(prefix).catch(() => 0);
  }
});

async function newBroker(kind: Kind, prefix: string): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: NATS_URL, prefix });
  brokers.push(broker);
  return broker;
}

/** A gateway on its own connection to the broker: one node. */
async function node(kind: Kind, prefix: string) {
  return res.gateway<{ user: string }>({
    broker: await newBroker(kind, prefix),
    authenticate: ({ query }) => {
      const user = query.get('user');
      if (!user) throw new UpgradeRejection(401);
      return { user };
    },
    userOf: (context) => context.user,
    userInbox: { maxLength: 10_000 },
  });
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    up ? `user inbox across nodes (${kind})` : `user inbox across nodes (${kind}; skipped)`,
    () => {
      it('a client moving from node A to node B while notifyUser keeps sending gets every message once, in order', async () => {
        const prefix = `wsrpcinbox${Math.random().toString(36).slice(2)}`;
        prefixes.push({ kind, prefix });
        const a = await node(kind, prefix);
        const b = await node(kind, prefix);
        // The sender has no session of the user: only its broker connection matters.
        const sender = await node(kind, prefix);
        const client = res.client([`${a.url}?user=zoe`, `${b.url}?user=zoe`], { inbox: true });
        const got: number[] = [];
        client.notificationsOf<[number]>('n').subscribe(([n]) => got.push(n));
        const gaps: InboxGap[] = [];
        client.inboxGaps$.subscribe((gap) => gaps.push(gap));
        await client.opened();
        await waitUntil(
          () => a.gateway.pubsub.topics()['~inbox.zoe'] === 1,
          'the inbox subscription on A',
        );

        let sent = 0;
        let sending = true;
        const pump = (async () => {
          while (sending) {
            const n = sent + 1;
            expect(await sender.gateway.notifyUser('zoe', 'n', [n])).toBeGreaterThan(0);
            sent = n;
          }
        })();
        try {
          await waitUntil(() => got.length >= 20, 'messages on node A', 20_000);
          // Node A goes away: the client finds it gone and moves on to B, resuming there.
          await a.gateway.close();
          await waitUntil(
            () => b.gateway.pubsub.topics()['~inbox.zoe'] === 1,
            'the inbox subscription on B',
            20_000,
          );
          const movedAt = sent;
          await waitUntil(() => sent >= movedAt + 20, 'messages sent after the move', 20_000);
        } finally {
          sending = false;
          await pump;
        }
        await waitUntil(() => got.length >= sent, `all ${sent} messages`, 20_000);
        await client.call('rpc.ping'); // a duplicate still on its way would be here now
        expect(got).toEqual(Array.from({ length: sent }, (_, i) => i + 1));
        expect(gaps).toEqual([]);
      });
    },
  );
}
