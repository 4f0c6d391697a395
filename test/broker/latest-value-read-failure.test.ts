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

describe.skipIf(skip)('latest value: a read that fails', () => {
  // The subscribe is answered before the read (ctx.afterReply in pubsub-service.ts), and the
  // read's failure is logged and the subscriber started live (sendLatest in pubsub-latest.ts):
  // the subscriber gets no word of it. Marked as failing until the server tells it.
  it.fails(
    'is told to the subscriber: the subscribe refused, or a word before the live messages',
    async () => {
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
      const reply = await raw.request('subscribe', [topic]);
      if (reply.error) {
        // Refused: the client knows it has no subscription, and may try again.
        expect(reply.error.code).toBe(-32009);
        return;
      }
      const id = reply.result as string;
      // The stream readable again: the next publish reaches the subscriber.
      await withRedis(REDIS_URL, (redis) => redis.del(log));
      expect(await gateway.publish(topic, { p: 2 })).toBe(2);
      await raw.until(
        () => raw.notifications(id).some((n) => n.seq === 2),
        'the live message after the failed read',
      );
      await raw.barrier();
      const frames = raw.notifications(id);
      // seq 1 (the latest value when it subscribed) never came: something before seq 2, or on
      // it, must say so (a frame that is no plain message, or `missed` on seq 2).
      const told = frames.some((n) => n.seq !== 2 || n.missed !== undefined);
      expect(told, JSON.stringify(frames)).toBe(true);
    },
  );
});
