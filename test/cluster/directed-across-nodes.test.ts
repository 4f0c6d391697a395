import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { canConnect } from '../support/network.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers: Broker[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});

type Kind = 'redis' | 'nats';

async function newBroker(kind: Kind, prefix: string): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: 'redis://127.0.0.1:6379', prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', prefix });
  brokers.push(broker);
  return broker;
}

/** Two gateways in this process, each with its own connection to one broker: two nodes. */
async function twoNodes(kind: Kind) {
  const prefix = `wsrpcdirected${Math.random().toString(36).slice(2)}`;
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    nodes.push(
      await res.gateway<{ user: string }>({
        broker: await newBroker(kind, prefix),
        authenticate: ({ query }) => {
          const user = query.get('user');
          if (!user) throw new UpgradeRejection(401);
          return { user };
        },
        userOf: (context) => context.user,
      }),
    );
  }
  return nodes as [(typeof nodes)[0], (typeof nodes)[0]];
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    up
      ? `reaching sessions across nodes (${kind})`
      : `reaching sessions across nodes (${kind}; skipped: no ${kind} on 127.0.0.1)`,
    () => {
      it('notifySession on one node reaches a session connected to the other', async () => {
        const [a, b] = await twoNodes(kind);
        const client = res.client(`${b.url}?user=carol`);
        await client.opened();
        await waitUntil(() => b.gateway.sessions.size === 1, 'the session on node B');
        const [session] = [...b.gateway.sessions.values()];
        const got = firstValueFrom(client.notificationsOf('direct'));
        expect(a.gateway.sessions.has(session!.id)).toBe(false);
        expect(await a.gateway.notifySession(session!.id, 'direct', ['via node A'])).toBe(true);
        expect(await got).toEqual(['via node A']);
      });

      it("notifyUser right after the sessions' first answers reaches that user's sessions on both nodes, once, and nobody else", async () => {
        const [a, b] = await twoNodes(kind);
        const onA = res.client(`${a.url}?user=dave`);
        const onB = res.client(`${b.url}?user=dave`);
        const other = res.client(`${b.url}?user=erin`);
        const got: Record<string, unknown[]> = { onA: [], onB: [], other: [] };
        onA.notificationsOf('hello').subscribe((p) => got['onA']!.push(p));
        onB.notificationsOf('hello').subscribe((p) => got['onB']!.push(p));
        other.notificationsOf('hello').subscribe((p) => got['other']!.push(p));
        // Each session's first call has been answered: from then on it is reachable.
        await Promise.all([onA, onB, other].map((client) => client.call('rpc.ping')));
        await a.gateway.notifyUser('dave', 'hello', { to: 'dave' });
        await waitUntil(
          () => got['onA']!.length > 0 && got['onB']!.length > 0,
          'dave on both nodes',
        );
        await Promise.all([onA, onB, other].map((client) => client.call('rpc.ping')));
        expect(got).toEqual({ onA: [{ to: 'dave' }], onB: [{ to: 'dave' }], other: [] });
      });
    },
  );
}
