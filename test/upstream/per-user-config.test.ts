// maxConcurrentPerUser as a configuration file gives it: checked where the upstream's other
// options are, defaulting to a quarter of maxConcurrent and never below the session's share.
import { describe, expect, it } from 'vitest';
import { resolveUpstreamsConfig } from '../../src/upstream/upstreams-config.js';

const url = 'http://orders:9000/rpc';
const shares = (orders: unknown) => {
  const upstream = resolveUpstreamsConfig({ upstreams: { orders } }).upstreams.get('orders')!;
  return [upstream.maxConcurrentPerSession, upstream.maxConcurrentPerUser];
};

describe('maxConcurrentPerUser', () => {
  it.each([
    [{ url }, [8, 16]],
    [{ url, maxConcurrent: 800 }, [100, 200]],
    [{ url, maxConcurrent: 15 }, [1, 3]],
    [{ url, maxConcurrent: 3 }, [1, 1]],
    [{ url, maxConcurrent: 1 }, [1, 1]],
    // Never below the session's share: a user has at least one session.
    [{ url, maxConcurrentPerSession: 32 }, [32, 32]],
    [{ url, maxConcurrentPerUser: 64 }, [8, 64]],
    // A smaller user share lowers the session's default to it.
    [{ url, maxConcurrentPerUser: 4 }, [4, 4]],
    [{ url, maxConcurrentPerSession: 2, maxConcurrentPerUser: 2 }, [2, 2]],
    // Apart from the address's share: either may be the larger.
    [{ url, maxConcurrentPerAddress: 4, maxConcurrentPerUser: 32 }, [4, 32]],
    [{ url, maxConcurrentPerAddress: 32, maxConcurrentPerUser: 4 }, [4, 4]],
    [{ nats: { url: 'nats://n', subject: 's' }, maxConcurrent: 32 }, [4, 8]],
  ])('of %j: [per session, per user] %j', (orders, expected) => {
    expect(shares(orders)).toEqual(expected);
  });

  it.each([
    [
      { url, maxConcurrentPerUser: 0 },
      'upstreams.orders.maxConcurrentPerUser must be an integer from 1 to 100000, not 0',
    ],
    [
      { url, maxConcurrentPerUser: 1.5 },
      'upstreams.orders.maxConcurrentPerUser must be an integer from 1 to 100000, not 1.5',
    ],
    [
      { url, maxConcurrentPerUser: 65 },
      'upstreams.orders.maxConcurrentPerUser must be at most maxConcurrent (64), not 65',
    ],
    [
      { url, maxConcurrentPerSession: 8, maxConcurrentPerUser: 4 },
      'upstreams.orders.maxConcurrentPerSession must be at most maxConcurrentPerUser (4), not 8',
    ],
    [
      { url, maxConcurrentPerSession: 8, maxConcurrentPerAddress: 16, maxConcurrentPerUser: 4 },
      'upstreams.orders.maxConcurrentPerSession must be at most maxConcurrentPerUser (4), not 8',
    ],
  ])('refuses %j', (orders, message) => {
    expect(() => shares(orders)).toThrow(message);
  });
});
