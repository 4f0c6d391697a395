import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { Resources } from '../integration/harness.js';
import { waitUntil } from '../pubsub/helpers.js';
import { canConnect } from '../support/network.js';

const reachable = await canConnect(6379);
const mustRun = process.env['CI'] === 'true';
const res = new Resources();
const brokers: RedisBroker[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});

/** Two gateways in this process, each with its own connection to one Redis: two nodes. */
async function twoNodes() {
  const prefix = `wsrpc-test-directed-${Math.random().toString(36).slice(2)}:`;
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const broker = await RedisBroker.create({ url: 'redis://127.0.0.1:6379', prefix });
    brokers.push(broker);
    nodes.push(
      await res.gateway<{ user: string }>({
        broker,
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

describe.skipIf(!reachable && !mustRun)(
  reachable
    ? 'reaching sessions across nodes (Redis)'
    : 'reaching sessions across nodes (skipped: no Redis on 127.0.0.1:6379)',
  () => {
    it('notifySession on one node reaches a session connected to the other', async () => {
      const [a, b] = await twoNodes();
      const client = res.client(`${b.url}?user=carol`);
      await client.opened();
      await waitUntil(() => b.gateway.sessions.size === 1, 'the session on node B');
      const [session] = [...b.gateway.sessions.values()];
      const got = firstValueFrom(client.notificationsOf('direct'));
      expect(a.gateway.sessions.has(session!.id)).toBe(false);
      expect(await a.gateway.notifySession(session!.id, 'direct', ['via node A'])).toBe(true);
      expect(await got).toEqual(['via node A']);
    });

    it("notifyUser on one node reaches that user's sessions on both nodes, and nobody else", async () => {
      const [a, b] = await twoNodes();
      const onA = res.client(`${a.url}?user=dave`);
      const onB = res.client(`${b.url}?user=dave`);
      const other = res.client(`${b.url}?user=erin`);
      await Promise.all([onA.opened(), onB.opened(), other.opened()]);
      const otherGot: unknown[] = [];
      other.notificationsOf('hello').subscribe((p) => otherGot.push(p));
      const gotA = firstValueFrom(onA.notificationsOf('hello'));
      const gotB = firstValueFrom(onB.notificationsOf('hello'));
      await waitUntil(
        () => a.gateway.sessions.size === 1 && b.gateway.sessions.size === 2,
        'the sessions',
      );
      // Each node starts listening for the user as the session opens, asynchronously: send
      // until both sessions have one (a retry may deliver twice; only the first is checked).
      let settled = false;
      void Promise.all([gotA, gotB]).then(() => (settled = true));
      for (let attempt = 0; attempt < 50 && !settled; attempt++) {
        await a.gateway.notifyUser('dave', 'hello', { to: 'dave' });
        await waitUntil(() => settled, 'dave on both nodes', 200).catch(() => undefined);
      }
      expect(await gotA).toEqual({ to: 'dave' });
      expect(await gotB).toEqual({ to: 'dave' });
      await other.call('rpc.ping');
      expect(otherGot).toEqual([]);
    });
  },
);
