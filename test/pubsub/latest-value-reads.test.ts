/**
 * A subscriber's start reads (a latest-value topic's last message, a position) are history
 * reads like a resume's pages: each holds one of the connection's slots
 * (`maxHistoryReadsPerConnection`, 2) and goes through the node's shared reads (at most
 * `maxHistoryReads`, 16, at the broker at once), and one that unsubscribes gives up the reads it
 * waits for. So a client subscribing and unsubscribing in batches keeps no more than that many
 * reads open at the broker (on NATS, a consumer each), and a subscriber that waited its turn
 * still gets the latest value first.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { History } from '../../src/pubsub/broker.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { NATS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const reachable = await canConnect(6379);
const prefix = `wsrpc-lv-reads:${randomBytes(6).toString('hex')}:`;
const reachableNats = await canConnect(4222);
const natsPrefix = `lvReads${randomBytes(4).toString('hex')}`;
const natsBrokers: NatsBroker[] = [];

const res = new Resources();
const brokers: RedisBroker[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  await Promise.all(natsBrokers.splice(0).map((b) => b.close()));
});
afterAll(async () => {
  if (reachable) await deleteRedisKeys(REDIS_URL, prefix.slice(0, -1));
  if (reachableNats) await deleteNatsStreams(natsPrefix);
});

describe.runIf(reachable)('latest-value reads (Redis)', () => {
  it('stay within maxHistoryReads on the node', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    // Count the broker's history reads under way (the real Redis answers them).
    let inFlight = 0;
    let maxInFlight = 0;
    let started = 0;
    const history = broker.history.bind(broker);
    broker.history = (topic: string, afterSeq: number, limit?: number): Promise<History> => {
      started++;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return history(topic, afterSeq, limit).finally(() => inFlight--);
    };
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('lv.*', { latestValue: true });
    await gateway.publish('lv.a', { p: 1 });

    const raw = await res.rawRpc(url);
    // A batch is answered in one frame (an array): its members, as frames.
    const replies = () =>
      raw.frames.flatMap((f) => (Array.isArray(f) ? (f as typeof raw.frames) : [f]));
    const maxHistoryReads = 16; // the limits table's default
    for (let round = 0; round < 5; round++) {
      // One batch: 50 subscribes to the topic, then a batch unsubscribing all of them.
      const ids = Array.from({ length: 50 }, () => raw.nextId());
      raw.send(ids.map((id) => ({ jsonrpc: '2.0', method: 'subscribe', params: ['lv.a'], id })));
      await raw.until(
        () => ids.every((id) => replies().some((f) => f.id === id)),
        'the subscribe replies',
      );
      const subs = ids.map((id) => replies().find((f) => f.id === id)!.result as string);
      const unsubIds = subs.map(() => raw.nextId());
      raw.send(
        subs.map((sub, i) => ({
          jsonrpc: '2.0',
          method: 'unsubscribe',
          params: [sub],
          id: unsubIds[i],
        })),
      );
      await raw.until(
        () => unsubIds.every((id) => replies().some((f) => f.id === id)),
        'the unsubscribe replies',
      );
    }
    const afterAllEnded = started;
    await new Promise((resolve) => setTimeout(resolve, 200));
    const startedAfterEnd = started - afterAllEnded;
    expect(gateway.pubsub.topics()).toEqual({});
    console.log(
      `latest-value reads: ${started} broker history reads, at most ${maxInFlight} at once; ` +
        `${startedAfterEnd} started after every subscription had ended`,
    );
    expect(maxInFlight).toBeLessThanOrEqual(maxHistoryReads);
    // One connection: its own slots bound it first (maxHistoryReadsPerConnection, 2).
    expect(maxInFlight).toBeLessThanOrEqual(2);
    // An unsubscribed subscriber's reads that were not sent yet never are.
    expect(startedAfterEnd).toBe(0);
  });

  it('give every subscriber that waited for a read slot the latest value first', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('lv.*', { latestValue: true });
    await gateway.publish('lv.b', { p: 1 });
    await gateway.publish('lv.b', { p: 2 });
    const raw = await res.rawRpc(url);
    const replies = () =>
      raw.frames.flatMap((f) => (Array.isArray(f) ? (f as typeof raw.frames) : [f]));
    // Ten subscribes at once from one connection: eight wait for one of its two slots.
    const ids = Array.from({ length: 10 }, () => raw.nextId());
    raw.send(ids.map((id) => ({ jsonrpc: '2.0', method: 'subscribe', params: ['lv.b'], id })));
    await raw.until(() => ids.every((id) => replies().some((f) => f.id === id)), 'the subscribes');
    const subs = ids.map((id) => replies().find((f) => f.id === id)!.result as string);
    const first = (sub: string) => raw.notifications(sub).find((n) => 'result' in n);
    await raw.until(() => subs.every((sub) => first(sub) !== undefined), 'every latest value');
    await gateway.publish('lv.b', { p: 3 });
    const values = (sub: string) =>
      raw
        .notifications(sub)
        .filter((n) => 'result' in n)
        .map((n) => [n.seq, n.result]);
    await raw.until(() => subs.every((sub) => values(sub).length >= 2), 'the live message');
    for (const sub of subs)
      expect(values(sub)).toEqual([
        [2, { p: 2 }],
        [3, { p: 3 }],
      ]);
  });

  it('position reads of subscribes stay within maxHistoryReads on the node', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    let inFlight = 0;
    let maxInFlight = 0;
    const history = broker.history.bind(broker);
    broker.history = (topic: string, afterSeq: number, limit?: number): Promise<History> => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return history(topic, afterSeq, limit).finally(() => inFlight--);
    };
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('pos.*');
    await gateway.publish('pos.a', { p: 1 });
    const raw = await res.rawRpc(url);
    const replies = () =>
      raw.frames.flatMap((f) => (Array.isArray(f) ? (f as typeof raw.frames) : [f]));
    const ids = Array.from({ length: 100 }, () => raw.nextId());
    raw.send(
      ids.map((id) => ({
        jsonrpc: '2.0',
        method: 'subscribe',
        params: ['pos.a', null, { position: true }],
        id,
      })),
    );
    await raw.until(() => ids.every((id) => replies().some((f) => f.id === id)), 'the replies');
    console.log(`position reads: at most ${maxInFlight} broker history reads at once`);
    expect(maxInFlight).toBeLessThanOrEqual(16);
    expect(maxInFlight).toBeLessThanOrEqual(2); // one connection's slots
  });
});

describe.runIf(reachableNats)('latest-value reads (NATS)', () => {
  it('stay within maxHistoryReads on the node (each read makes a consumer on the server)', async () => {
    const broker = await NatsBroker.connect({
      servers: NATS_URL,
      prefix: natsPrefix,
      timeoutMs: 5_000,
    });
    natsBrokers.push(broker);
    let inFlight = 0;
    let maxInFlight = 0;
    const history = broker.history.bind(broker);
    broker.history = (topic: string, afterSeq: number, limit?: number): Promise<History> => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return history(topic, afterSeq, limit).finally(() => inFlight--);
    };
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('lv.*', { latestValue: true });
    await gateway.publish('lv.a', { p: 1 });
    // Consumers on the topic's stream, sampled while the reads go on.
    const nc = await connectNats({ servers: NATS_URL });
    const jsm = await jetstreamManager(nc);
    let maxConsumers = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const info = await jsm.streams.info(`${natsPrefix}_lv_2Ea`);
        maxConsumers = Math.max(maxConsumers, info.state.consumer_count);
      }
    })();
    const raw = await res.rawRpc(url);
    const replies = () =>
      raw.frames.flatMap((f) => (Array.isArray(f) ? (f as typeof raw.frames) : [f]));
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 50 }, () => raw.nextId());
      raw.send(ids.map((id) => ({ jsonrpc: '2.0', method: 'subscribe', params: ['lv.a'], id })));
      await raw.until(
        () => ids.every((id) => replies().some((f) => f.id === id)),
        'the subscribes',
      );
      const subs = ids.map((id) => replies().find((f) => f.id === id)!.result as string);
      const unsubIds = subs.map(() => raw.nextId());
      raw.send(
        subs.map((sub, i) => ({
          jsonrpc: '2.0',
          method: 'unsubscribe',
          params: [sub],
          id: unsubIds[i],
        })),
      );
      await raw.until(
        () => unsubIds.every((id) => replies().some((f) => f.id === id)),
        'the unsubscribes',
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    sampling = false;
    await sampler;
    await nc.close();
    console.log(
      `NATS latest-value reads: at most ${maxInFlight} at once; at most ${maxConsumers} consumers seen on the stream`,
    );
    expect(maxInFlight).toBeLessThanOrEqual(16);
    expect(maxInFlight).toBeLessThanOrEqual(2); // one connection's slots
  });
});
