import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import { NATS_URL, REDIS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { canConnect } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

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
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix);
    else await deleteNatsStreams(prefix);
  }
});

type Kind = 'redis' | 'nats';

/** Three gateways in this process, each with its own connection to one broker: three nodes. */
async function threeNodes(kind: Kind) {
  const prefix = `wsrpcexcept${Math.random().toString(36).slice(2)}`;
  prefixes.push({ kind, prefix });
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
        : await NatsBroker.connect({ servers: NATS_URL, prefix });
    brokers.push(broker);
    const node = await res.gateway({ broker, exposeErrorDetails: true });
    node.gateway.topic('chat.*');
    node.gateway.topic('price.*', { latestValue: true });
    nodes.push(node);
  }
  return nodes;
}

/** A raw client on `node` subscribed to `topic` with its position (a hole would show as a gap). */
async function member(node: { gateway: Gateway<unknown>; url: string }, topic: string) {
  const before = sessionIds(node.gateway);
  const raw = await RawRpc.open(node.url);
  res.track(raw.socket);
  const sessionId = newSession(node.gateway, before).id;
  const id = (await raw.request('subscribe', [topic, null, { position: true }])).result as string;
  await raw.until(() => raw.notifications(id).length >= 1, 'the position');
  return { raw, id, sessionId };
}

function messages(raw: RawRpc, id: string): unknown[] {
  return raw
    .notifications(id)
    .filter((n) => n.seq !== undefined && 'result' in n)
    .map((n) => n.result);
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    up ? `publish except across nodes (${kind})` : `publish except (${kind}; skipped: no ${kind})`,
    () => {
      it('a broadcast except the sender reaches everyone but the sender, on every node', async () => {
        const nodes = await threeNodes(kind);
        const members = [];
        for (const node of nodes) {
          members.push(await member(node, 'chat.room'), await member(node, 'chat.room'));
        }
        const sender = members[0]!;
        const alsoLeftOut = members[5]!; // on the third node
        // Published on the second node: the sender's node learns of the list through the broker.
        await nodes[1]!.gateway.publish('chat.room', 'hello', { except: sender.sessionId });
        await nodes[2]!.gateway.publish('chat.room', 'to most', {
          except: [sender.sessionId, alsoLeftOut.sessionId],
        });
        await nodes[0]!.gateway.publish('chat.room', 'to all');
        for (const m of members) {
          await m.raw.until(() => messages(m.raw, m.id).at(-1) === 'to all', 'the last message');
          await m.raw.barrier();
        }
        members.forEach((m, i) => {
          const expected =
            m === sender
              ? ['to all']
              : m === alsoLeftOut
                ? ['hello', 'to all']
                : ['hello', 'to most', 'to all'];
          expect(messages(m.raw, m.id), `member ${i}`).toEqual(expected);
          const signals = m.raw
            .notifications(m.id)
            .filter((n) => n.gap !== undefined || n.missed !== undefined);
          expect(signals, `member ${i}: no gap, nothing missed`).toEqual([]);
          expect(m.raw.notifications(m.id).at(-1)).toMatchObject({ seq: 3 });
        });
        if (kind === 'redis') {
          // The stream entry keeps the list, so a node catching up from it still skips them.
          const stored = await brokers.at(-1)!.history('chat.room', 0);
          expect(stored.messages.map((m) => m.except)).toEqual([
            [sender.sessionId],
            [sender.sessionId, alsoLeftOut.sessionId],
            undefined,
          ]);
        }
        // History keeps every message for everyone.
        const history = await members[0]!.raw.request('topic.history', {
          topic: 'chat.room',
          since: 0,
        });
        expect(history.result).toMatchObject({
          messages: [
            { seq: 1, data: 'hello' },
            { seq: 2, data: 'to most' },
            { seq: 3, data: 'to all' },
          ],
          lastSeq: 3,
        });
      });

      it('a latest-value topic gives a new subscriber on another node the last message, then live ones', async () => {
        const nodes = await threeNodes(kind);
        await nodes[0]!.gateway.publish('price.btc', 1);
        await nodes[0]!.gateway.publish('price.btc', 2);
        const raw = await RawRpc.open(nodes[2]!.url);
        res.track(raw.socket);
        const id = (await raw.request('subscribe', ['price.btc'])).result as string;
        await raw.until(() => messages(raw, id).length >= 1, 'the latest value');
        await nodes[1]!.gateway.publish('price.btc', 3);
        await raw.until(() => messages(raw, id).length >= 2, 'the live message');
        await raw.barrier();
        expect(raw.notifications(id).map((n) => [n.seq, n.result])).toEqual([
          [2, 2],
          [3, 3],
        ]);
      });
    },
  );
}
