// Every call an HTTP upstream admits has a pool socket of its own: one client address holding
// its whole share with calls the upstream never answers cannot leave another address's call,
// admitted within maxConcurrent, waiting for a socket. The upstream holds each request until the
// test releases it, so a call that reached it is a call that had a socket.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveUpstreamsConfig, upstreamBounds } from '../../src/upstream/index.js';
import type { HttpUpstreamConfig } from '../../src/upstream/index.js';
import { waitFor } from '../support/waiting.js';
import { heldSharesPerFile } from './held-upstream.js';

const url = 'http://orders:8080/rpc';

/** The HTTP upstream `orders` as `options` resolve. */
function resolved(options: Record<string, unknown>): HttpUpstreamConfig {
  const config = resolveUpstreamsConfig({ upstreams: { orders: { url, ...options } } });
  return config.upstreams.get('orders') as HttpUpstreamConfig;
}

const shares = heldSharesPerFile(
  // Every default: maxConcurrent 64, a session's share 8, an address's 16, and the pool's
  // sockets as many as the calls admitted.
  (heldUrl) => ({ shared: { url: heldUrl, timeoutMs: 60_000 } }),
  { 'shared.*': 'shared' },
);

describe("an HTTP upstream's pool", () => {
  it("gives another address's call a socket while one address holds its whole share", async () => {
    const a1 = await shares.sessionFrom('127.0.0.2', 'a1');
    const a2 = await shares.sessionFrom('127.0.0.2', 'a2');
    const b = await shares.sessionFrom('127.0.0.3', 'b');
    const held = [];
    for (let i = 0; i < 8; i++) held.push(a1.request('shared.slow'), a2.request('shared.slow'));
    await waitFor(
      () => shares.heldFor('a1') === 8 && shares.heldFor('a2') === 8,
      'the address to hold its 16 calls at the upstream',
    );
    const fast = b.request('shared.fast');
    await waitFor(
      () => shares.heldFor('b') === 1,
      "the other address's call to reach the upstream",
    );
    shares.upstream.release((request) => request.method === 'shared.fast');
    expect((await fast).result).toEqual({ ok: true });
    expect(shares.heldFor('a1') + shares.heldFor('a2')).toBe(16);
    shares.upstream.release();
    for (const reply of await Promise.all(held)) expect(reply.result).toEqual({ ok: true });
  });
});

describe("an HTTP upstream's connections", () => {
  it('are as many as maxConcurrent unless given', () => {
    expect(resolved({}).connections).toBe(64);
    expect(resolved({ maxConcurrent: 300 }).connections).toBe(300);
    expect(resolved({ maxConcurrent: 3, connections: 5 }).connections).toBe(5);
  });

  it('given alone and fewer than the default maxConcurrent, make maxConcurrent as many, its shares with it', () => {
    expect(resolved({ connections: 16 })).toMatchObject({
      connections: 16,
      maxConcurrent: 16,
      maxConcurrentPerSession: 2,
      maxConcurrentPerAddress: 4,
      maxConcurrentPerUser: 4,
    });
    expect(resolved({ connections: 200 })).toMatchObject({ connections: 200, maxConcurrent: 64 });
    // A share given beyond what the sockets allow is refused, as past any maxConcurrent.
    expect(() => resolved({ connections: 4, maxConcurrentPerSession: 8 })).toThrow(RangeError);
  });

  it.each([
    [
      { maxConcurrent: 64, connections: 16 },
      'upstreams.orders.connections must be at least maxConcurrent (64), not 16: each call admitted needs a pool socket of its own, else the calls of one client address can hold every socket while the calls admitted for others wait (lower maxConcurrent to keep fewer sockets)',
    ],
    [
      { maxConcurrent: 10, connections: 9 },
      'upstreams.orders.connections must be at least maxConcurrent (10), not 9',
    ],
    [
      { connections: upstreamBounds.maxConcurrent + 1 },
      `upstreams.orders.connections must be an integer from 1 to ${upstreamBounds.maxConcurrent}, not ${upstreamBounds.maxConcurrent + 1}`,
    ],
  ])('refuses %j', (options, message) => {
    expect(() => resolved(options)).toThrow(message);
  });

  it('are never fewer than the calls the upstream admits, whatever the options (or they are refused)', () => {
    const count = fc.option(fc.integer({ min: 1, max: upstreamBounds.maxConcurrent }), {
      nil: undefined,
    });
    fc.assert(
      fc.property(
        count,
        count,
        count,
        count,
        (maxConcurrent, connections, perSession, perAddress) => {
          const options: Record<string, unknown> = {};
          if (maxConcurrent !== undefined) options['maxConcurrent'] = maxConcurrent;
          if (connections !== undefined) options['connections'] = connections;
          if (perSession !== undefined) options['maxConcurrentPerSession'] = perSession;
          if (perAddress !== undefined) options['maxConcurrentPerAddress'] = perAddress;
          let upstream: HttpUpstreamConfig;
          try {
            upstream = resolved(options);
          } catch (err) {
            expect(err).toBeInstanceOf(RangeError);
            return;
          }
          expect(upstream.connections).toBeGreaterThanOrEqual(upstream.maxConcurrent);
          // Refused only for an explicit maxConcurrent above the sockets, or a share past it.
          if (maxConcurrent === undefined) {
            expect(upstream.maxConcurrent).toBe(Math.min(64, connections ?? Infinity));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
