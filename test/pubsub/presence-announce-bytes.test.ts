/**
 * Presence announcements travel in messages of at most 256 KiB of JSON each, in UTF-8 bytes
 * (ANNOUNCE_BYTES, docs/pubsub.md), so that a node's whole membership stays under a broker's
 * message bound: members whose `info` (within its 1 KiB of UTF-8) is not ASCII take up to three
 * bytes a character. Real Redis, real sockets; the announcements read off the broker's channel.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { ANNOUNCE_BYTES } from '../../src/server/presence-service.js';
import { redisDirectChannel } from '../../src/pubsub/redis-keys.js';
import { deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const reachable = await canConnect(6379);
const prefix = `wsrpc-test-presence-bytes:${randomBytes(6).toString('hex')}:`;

const res = new Resources();
const brokers: RedisBroker[] = [];
const listeners: Redis[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  for (const l of listeners.splice(0)) l.disconnect();
});
afterAll(async () => {
  if (reachable) await deleteRedisKeys(REDIS_URL, prefix.slice(0, -1));
});

describe.runIf(reachable)('presence announcements (Redis)', () => {
  it('are at most 256 KiB of JSON each', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway, url } = await res.gateway({ broker });
    // 911 bytes of JSON (within the 1 KiB `info` bound), 311 characters.
    gateway.topic('room.*', { presence: { info: () => ({ name: '名'.repeat(300) }) } });

    const listener = new Redis(REDIS_URL);
    listeners.push(listener);
    const sizes: number[] = [];
    listener.on('messageBuffer', (_channel: Buffer, message: Buffer) => sizes.push(message.length));
    await listener.subscribe(redisDirectChannel(prefix, '$presence.room.1'));

    // 400 members of room.1 on this node: four connections, 100 subscriptions each.
    for (let c = 0; c < 4; c++) {
      const raw = await res.rawRpc(url);
      const ids = Array.from({ length: 100 }, () => raw.nextId());
      raw.send(ids.map((id) => ({ jsonrpc: '2.0', method: 'subscribe', params: ['room.1'], id })));
      await raw.until(
        () => raw.frames.some((f) => Array.isArray(f) && (f as unknown[]).length === 100),
        'the subscribe replies',
      );
    }
    await waitUntil(async () => (await gateway.presence('room.1').count()) === 400, '400 members');
    sizes.length = 0;
    // Closing, the node tells every node its members left: its whole membership at once.
    await gateway.close();
    await waitUntil(() => sizes.length > 0, 'the leave announcements');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Split, not one message of the whole membership (about 360 KiB).
    expect(sizes.length).toBeGreaterThan(1);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(ANNOUNCE_BYTES);
  });
});
