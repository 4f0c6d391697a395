/**
 * A node cut from its broker for longer than the topic's history reaches: when its link comes
 * back it catches up from what history still holds, and its subscribers are told exactly what
 * it could no longer get (a gap signal to those that track positions, `missed` to the others)
 * instead of skipping that span silently. Real Redis and NATS, the node's link through a TCP
 * relay the test cuts, while a second broker client (another node) keeps publishing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker, Retention } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { Resources } from '../support/resources.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { waitFor } from '../support/waiting.js';
import { canConnect } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import type { SubscriptionParams } from '../support/raw-rpc.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const redisPrefix = `wsrpc-test-linkgap:${randomBytes(6).toString('hex')}`;
const natsPrefix = `wsrpclinkgap${randomBytes(5).toString('hex')}`;

/** The topic keeps this many messages; more than that are published while the node is cut. */
const HISTORY = 20;
const retention: Retention = { maxLength: HISTORY, maxAgeMs: 600_000 };
const WHILE_CUT = 220;

const res = new Resources();
const closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await res.cleanup();
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

afterAll(async () => {
  if (redisUp) await deleteRedisKeys('redis://127.0.0.1:6379', redisPrefix);
  if (natsUp) await deleteNatsStreams(natsPrefix).catch(() => undefined);
});

interface Brokers {
  /** The node's broker, connected through `relay`. */
  node: Broker;
  /** Another node's broker, never cut. */
  other: Broker;
  relay: TcpRelay;
}

async function raw(url: string): Promise<RawRpc> {
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return client;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

function lastSeq(messages: readonly SubscriptionParams[]): number {
  return messages.reduce((max, m) => Math.max(max, m.seq ?? 0), 0);
}

/**
 * A gateway on `node`, a subscriber with `position: true` and a plain one; `other` publishes
 * throughout. The node is cut while WHILE_CUT messages are published, then restored.
 */
async function cutLongerThanHistory({ node, other, relay }: Brokers): Promise<void> {
  const topic = `feed-${randomBytes(4).toString('hex')}`;
  const publish = async (from: number, to: number): Promise<void> => {
    for (let n = from; n <= to; n++) {
      expect(await other.publish(topic, JSON.stringify(`m${n}`), retention)).toBe(n);
    }
  };
  // The topic exists (with its retention) before the node subscribes.
  await publish(1, 3);
  const { gateway, url } = await res.gateway({ broker: node });
  gateway.topic(topic, { history: retention });
  const tracking = await raw(url);
  const plain = await raw(url);
  const trackingId = (await tracking.request('subscribe', [topic, null, { position: true }]))
    .result as string;
  const plainId = (await plain.request('subscribe', [topic])).result as string;
  expect(typeof trackingId).toBe('string');
  expect(typeof plainId).toBe('string');
  await tracking.until(() => tracking.notifications(trackingId).length === 1, 'the position');
  const received = (client: RawRpc, id: string) => client.notifications(id);
  const upTo = async (seq: number): Promise<void> => {
    await tracking.until(() => lastSeq(received(tracking, trackingId)) >= seq, `seq ${seq}`);
    await plain.until(() => lastSeq(received(plain, plainId)) >= seq, `seq ${seq} (plain)`);
  };
  await publish(4, 5);
  await upTo(5);

  await relay.cut();
  await waitFor(() => !node.ready, 'the node to notice its broker link is down');
  const lastCut = 5 + WHILE_CUT;
  await publish(6, lastCut);
  // What history still holds when the node comes back: everything before it is lost to it.
  const held = await other.history(topic, 0);
  const firstRetained = held.messages[0]!.seq;
  expect(held.lastSeq).toBe(lastCut);
  expect(firstRetained).toBeGreaterThan(6);
  const epoch = held.epoch;

  await relay.restore();
  await waitFor(() => node.ready, 'the node to reconnect');
  await upTo(lastCut);
  // Later messages carry on as before.
  await publish(lastCut + 1, lastCut + 3);
  await upTo(lastCut + 3);
  await tracking.barrier();
  await plain.barrier();

  const lost = firstRetained - 6;
  const message = (id: string, seq: number) => ({ subscription: id, seq, result: `m${seq}` });
  expect(received(tracking, trackingId)).toEqual([
    epoch === undefined
      ? { subscription: trackingId, seq: 3 }
      : { subscription: trackingId, seq: 3, epoch },
    message(trackingId, 4),
    message(trackingId, 5),
    epoch === undefined
      ? { subscription: trackingId, gap: lost }
      : { subscription: trackingId, gap: lost, epoch },
    ...range(firstRetained, lastCut + 3).map((seq) => message(trackingId, seq)),
  ]);
  // A subscriber of the plain convention (every notification has a result) is told in `missed`.
  expect(received(plain, plainId)).toEqual([
    message(plainId, 4),
    message(plainId, 5),
    { ...message(plainId, firstRetained), missed: lost },
    ...range(firstRetained + 1, lastCut + 3).map((seq) => message(plainId, seq)),
  ]);
}

describe.skipIf(!redisUp && !mustRun)('a node cut from Redis longer than history', () => {
  it('its subscribers get a gap signal (position) or missed (plain) for exactly the lost span, then everything after', async () => {
    const relay = new TcpRelay(6379);
    await relay.start();
    closers.push(() => relay.cut());
    const options = {
      prefix: `${redisPrefix}:`,
      commandTimeoutMs: 1_000,
      reconnectMaxDelayMs: 100,
    };
    const node = await RedisBroker.create({
      url: `redis://127.0.0.1:${relay.port}`,
      ...options,
    });
    closers.push(() => node.close());
    const other = await RedisBroker.create({ url: 'redis://127.0.0.1:6379', ...options });
    closers.push(() => other.close());
    await cutLongerThanHistory({ node, other, relay });
  });
});

describe.skipIf(!natsUp && !mustRun)('a node cut from NATS longer than history', () => {
  it('its subscribers get a gap signal (position) or missed (plain) for exactly the lost span, then everything after', async () => {
    const relay = new TcpRelay(4222);
    await relay.start();
    closers.push(() => relay.cut());
    const options = { prefix: natsPrefix, timeoutMs: 2_000, reconnectWaitMs: 100 };
    const node = await NatsBroker.connect({
      servers: `nats://127.0.0.1:${relay.port}`,
      ...options,
    });
    closers.push(() => node.close());
    const other = await NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', ...options });
    closers.push(() => other.close());
    await cutLongerThanHistory({ node, other, relay });
  });
});
