/**
 * deleteRedisKeys, with which the tests on the shared Redis clean up: it deletes every key under
 * `prefix:` (what a RedisBroker with prefix `${prefix}:` makes) and no other, and refuses a
 * prefix given with its colon, which would look under `prefix::` and leave every key behind.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { REDIS_URL, deleteRedisKeys, withRedis } from '../support/brokers.js';
import { canConnect } from '../support/network.js';

const redisUp = (await canConnect(6379)) || process.env['CI'] === 'true';

describe.skipIf(!redisUp)('deleteRedisKeys (test support)', () => {
  it('deletes every key under prefix: and none of a prefix that only starts the same', async () => {
    const prefix = `wsrpccleanup${randomBytes(5).toString('hex')}`;
    const ours = [`${prefix}:{chat.room}:meta`, `${prefix}:{chat.room}:log`, `${prefix}:api`];
    const neighbour = `${prefix}x:api`;
    await withRedis(REDIS_URL, async (redis) => {
      for (const key of [...ours, neighbour]) await redis.set(key, '1');
    });
    try {
      expect(await deleteRedisKeys(REDIS_URL, prefix)).toBe(ours.length);
      const left = await withRedis(REDIS_URL, (redis) => redis.keys(`${prefix}*`));
      expect(left).toEqual([neighbour]);
    } finally {
      await withRedis(REDIS_URL, (redis) => redis.del(...ours, neighbour));
    }
  });

  it('refuses a prefix that ends in ":" (it would delete nothing)', async () => {
    await expect(deleteRedisKeys(REDIS_URL, 'wsrpccleanup:')).rejects.toThrow(
      'deleteRedisKeys takes the prefix without its ":" ("wsrpccleanup" for the keys "wsrpccleanup:*"), not "wsrpccleanup:"',
    );
  });
});
