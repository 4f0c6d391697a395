// Server-side membership across nodes, on Redis and on NATS: gateway.join and gateway.leave on
// one node for a session on another (the answer, a refusal, an unknown session), and a joined
// subscription that survives the client's move to another node, resumed there by the client.
import { afterEach, describe, expect, it } from 'vitest';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { REDIS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers: Broker[] = [];
const prefixes: { kind: Kind; prefix: string }[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  for (const { kind, prefix } of prefixes.splice(0)) {
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
    else await deleteNatsStreams(prefix).catch(() => 0);
  }
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
  const prefix = `wsrpcmember${Math.random().toString(36).slice(2)}`;
  prefixes.push({ kind, prefix });
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const node = await res.gateway({ broker: await newBroker(kind, prefix) });
    node.gateway.topic('room.*', { authorize: ({ topic }) => topic !== 'room.closed' });
    nodes.push(node);
  }
  return nodes as [(typeof nodes)[0], (typeof nodes)[0]];
}

async function onlySession(gateway: Gateway): Promise<Session> {
  await waitUntil(() => gateway.sessions.size === 1, 'one session');
  return [...gateway.sessions.values()][0]!;
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    up
      ? `server-side membership across nodes (${kind})`
      : `server-side membership across nodes (${kind}; skipped: no ${kind} on 127.0.0.1)`,
    () => {
      it('gateway.join on node A subscribes a session on node B; refusals and leave come back', async () => {
        const [a, b] = await twoNodes(kind);
        const client = res.client(b.url);
        const events: SubscriptionEvent<unknown>[] = [];
        let completed = false;
        client.joined$.subscribe(({ subscription }) =>
          subscription.subscribe({
            next: (e) => events.push(e),
            complete: () => (completed = true),
          }),
        );
        await client.opened();
        const session = await onlySession(b.gateway);
        expect(a.gateway.sessions.has(session.id)).toBe(false);

        expect(await a.gateway.join(session.id, 'room.1')).toBe(true);
        expect(b.gateway.pubsub.subscriptionCount(session)).toBe(1);
        await a.gateway.publish('room.1', 'hello');
        await waitUntil(() => events.length === 1, 'the message on node B');
        expect(events[0]).toMatchObject({ data: 'hello', seq: 1 });
        expect(client.subscriptionOf('room.1')).toBeDefined();

        await expect(a.gateway.join(session.id, 'room.closed')).rejects.toMatchObject({
          code: ErrorCode.Unauthorized,
          data: { topic: 'room.closed' },
        });
        await expect(a.gateway.join(session.id, 'nowhere')).rejects.toMatchObject({
          code: ErrorCode.InvalidParams,
        });
        const unknown = `${b.gateway.nodeId}-nosuchsession000000000`;
        expect(await a.gateway.join(unknown, 'room.1')).toBe(false);

        expect(await a.gateway.leave(session.id, 'room.1')).toBe(true);
        await waitUntil(() => completed, 'the stream end');
        expect(await a.gateway.leave(session.id, 'room.1')).toBe(false);
        expect(b.gateway.pubsub.topics()).toEqual({});
      });

      it("a joined subscription survives the client's move to another node: resubscribed there, nothing lost", async () => {
        const [a, b] = await twoNodes(kind);
        const client = res.client([b.url, a.url]);
        const data: unknown[] = [];
        client.joined$.subscribe(({ subscription }) =>
          subscription.subscribe((e) => data.push(e.data)),
        );
        await client.opened();
        const onB = await onlySession(b.gateway);
        await a.gateway.join(onB.id, 'room.2');
        for (const n of [1, 2]) await a.gateway.publish('room.2', n);
        await waitUntil(() => data.length === 2, 'two messages on node B');

        // Node B sends the client away (rpc.reconnect); its next URL is node A.
        const moved = onB.drain({ deadlineMs: 2_000 });
        for (const n of [3, 4]) await b.gateway.publish('room.2', n);
        await moved;
        const onA = await onlySession(a.gateway);
        await waitUntil(() => a.gateway.pubsub.subscriptionCount(onA) === 1, 'resubscribed on A');
        for (const n of [5, 6]) await b.gateway.publish('room.2', n);
        await waitUntil(() => data.length === 6, 'every message');
        expect(data).toEqual([1, 2, 3, 4, 5, 6]);
        // On node A it is the session's subscription: leave ends it there.
        expect(await b.gateway.leave(onA.id, 'room.2')).toBe(true);
      });
    },
  );
}
