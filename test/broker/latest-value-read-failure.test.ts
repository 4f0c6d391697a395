/**
 * A latest-value topic whose last message cannot be read (the broker answers the read with an
 * error): the new subscriber must be told, not left to take "nothing first" for "the topic has
 * no message". On the shared Redis, under a random prefix: the topic's stream key is made a
 * string, so the history read fails (WRONGTYPE), once the node holds the topic's broker
 * subscription (a first subscriber), so that the subscribe itself needs nothing else.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisBroker, redisTopicKeys } from '../../src/pubsub/redis-broker.js';
import { deleteRedisKeys, withRedis } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const skip = !(await canConnect(6379)) && process.env['CI'] !== 'true';
const base = `wsrpc-test-latest-${randomBytes(6).toString('hex')}`;
const prefix = `${base}:`;

const res = new Resources();
const brokers: RedisBroker[] = [];

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});

afterAll(async () => {
  if (!skip) await deleteRedisKeys(REDIS_URL, base);
});

describe.skipIf(skip)('where a subscription starts: a read that fails', () => {
  // The read happens before the reply; its failure refuses the subscribe (-32009).
  it('refuses the subscribe with -32009, and a retry once it reads subscribes', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('price.*', { latestValue: true });
    const topic = 'price.btc';
    expect(await gateway.publish(topic, { p: 1 })).toBe(1);

    // A first subscriber: the node holds the topic's broker subscription from here on, so a
    // later subscriber on the node needs no broker round trip but its latest value's read.
    const first = await RawRpc.open(url);
    res.track(first.socket);
    const firstId = (await first.request('subscribe', [topic])).result as string;
    await first.until(() => first.notifications(firstId).length >= 1, 'the first latest value');

    // The read of its last message now fails (WRONGTYPE).
    const { log } = redisTopicKeys(prefix, topic);
    await withRedis(REDIS_URL, (redis) => redis.set(log, 'not a stream'));

    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const refused = await raw.request('subscribe', [topic]);
    // Refused: the client knows it has no subscription, and may try again.
    expect(refused.error?.code).toBe(-32009);

    // The stream readable again: a retry subscribes, and the next publish reaches it.
    await withRedis(REDIS_URL, (redis) => redis.del(log));
    const id = (await raw.request('subscribe', [topic])).result as string;
    expect(typeof id).toBe('string');
    expect(await gateway.publish(topic, { p: 2 })).toBe(2);
    await raw.until(
      () => raw.notifications(id).some((n) => n.seq === 2),
      'the live message after the retry',
    );
  });

  it('a position that cannot be read refuses the subscribe with -32009 too', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('feed.*');
    const topic = 'feed.position';
    expect(await gateway.publish(topic, { p: 1 })).toBe(1);
    // A first subscriber: the node holds the topic's broker subscription from here on.
    const first = await RawRpc.open(url);
    res.track(first.socket);
    const firstReply = await first.request('subscribe', [topic]);
    expect(firstReply.result, JSON.stringify(firstReply)).toBeDefined();

    const { log } = redisTopicKeys(prefix, topic);
    await withRedis(REDIS_URL, (redis) => redis.set(log, 'not a stream'));
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const refused = await raw.request('subscribe', [topic, null, { position: true }]);
    // Not started without the position it asked for, which it could check nothing against.
    expect(refused.error?.code).toBe(-32009);

    await withRedis(REDIS_URL, (redis) => redis.del(log));
    const id = (await raw.request('subscribe', [topic, null, { position: true }])).result as string;
    expect(typeof id).toBe('string');
    await raw.until(
      () => raw.notifications(id).some((n) => n.seq !== undefined),
      'the position once it reads',
    );
  });
});
