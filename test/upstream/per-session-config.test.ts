// maxConcurrentPerSession as a configuration file gives it: checked where the upstream's other
// options are, defaulting to an eighth of maxConcurrent.
import { describe, expect, it } from 'vitest';
import { resolveUpstreamsConfig } from '../../src/upstream/upstreams-config.js';

const url = 'http://orders:9000/rpc';
const perSession = (orders: unknown) =>
  resolveUpstreamsConfig({ upstreams: { orders } }).upstreams.get('orders')!
    .maxConcurrentPerSession;

describe('maxConcurrentPerSession', () => {
  it.each([
    [{ url }, 8],
    [{ url, maxConcurrent: 800 }, 100],
    [{ url, maxConcurrent: 15 }, 1],
    [{ url, maxConcurrent: 1 }, 1],
    [{ url, maxConcurrentPerSession: 64 }, 64],
    [{ nats: { url: 'nats://n', subject: 's' }, maxConcurrent: 32 }, 4],
  ])('of %j is %i', (orders, expected) => {
    expect(perSession(orders)).toBe(expected);
  });

  it.each([
    [
      { url, maxConcurrentPerSession: 0 },
      'upstreams.orders.maxConcurrentPerSession must be an integer from 1 to 100000, not 0',
    ],
    [
      { url, maxConcurrentPerSession: 2.5 },
      'upstreams.orders.maxConcurrentPerSession must be an integer from 1 to 100000, not 2.5',
    ],
    [
      { url, maxConcurrentPerSession: 65 },
      'upstreams.orders.maxConcurrentPerSession must be at most maxConcurrent (64), not 65',
    ],
    [
      { url, maxConcurrent: 4, maxConcurrentPerSession: 5 },
      'upstreams.orders.maxConcurrentPerSession must be at most maxConcurrent (4), not 5',
    ],
  ])('refuses %j', (orders, message) => {
    expect(() => perSession(orders)).toThrow(message);
  });
});
