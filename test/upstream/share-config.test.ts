// Each share of an upstream (maxConcurrentPerSession, maxConcurrentPerAddress,
// maxConcurrentPerUser) and the slots it keeps for new callers (reservedForNewCallers) as a
// configuration file gives them: checked where the upstream's other options are. The session's
// share defaults to an eighth of maxConcurrent; the address's and the user's to a quarter, never
// below the session's share; the slots kept to an eighth.
import { describe, expect, it } from 'vitest';
import { resolveUpstreamsConfig } from '../../src/upstream/upstreams-config.js';

type Share =
  | 'maxConcurrentPerSession'
  | 'maxConcurrentPerAddress'
  | 'maxConcurrentPerUser'
  | 'reservedForNewCallers';

const url = 'http://orders:9000/rpc';
const nats = { nats: { url: 'nats://n', subject: 's' }, maxConcurrent: 32 };

/** The values of `shares` that the upstream `orders` configured as `orders` resolves to. */
const resolved = (orders: unknown, shares: readonly Share[]): number[] => {
  const upstream = resolveUpstreamsConfig({ upstreams: { orders } }).upstreams.get('orders')!;
  return shares.map((share) => upstream[share]);
};

interface ShareCases {
  /** The share under test, after the session's share when it is another. */
  readonly shares: readonly Share[];
  /** An upstream's configuration, and the values of `shares` it resolves to. */
  readonly values: readonly (readonly [unknown, readonly number[]])[];
  /** An upstream's configuration, and the message it is refused with. */
  readonly refusals: readonly (readonly [unknown, string])[];
}

/**
 * The cases of an address's or a user's `share` (a quarter of maxConcurrent by default, never
 * below the session's share), with the share's own `more`.
 */
function quarterShare(
  share: Share,
  more: Pick<ShareCases, 'values' | 'refusals'> = { values: [], refusals: [] },
): ShareCases {
  return {
    shares: ['maxConcurrentPerSession', share],
    values: [
      [{ url }, [8, 16]],
      [{ url, maxConcurrent: 800 }, [100, 200]],
      [{ url, maxConcurrent: 15 }, [1, 3]],
      [{ url, maxConcurrent: 3 }, [1, 1]],
      [{ url, maxConcurrent: 1 }, [1, 1]],
      // Never below the session's share: an address, or a user, has at least one session.
      [{ url, maxConcurrentPerSession: 32 }, [32, 32]],
      [{ url, [share]: 64 }, [8, 64]],
      // A smaller share lowers the session's default to it.
      [{ url, [share]: 4 }, [4, 4]],
      [{ url, maxConcurrentPerSession: 2, [share]: 2 }, [2, 2]],
      [nats, [4, 8]],
      ...more.values,
    ],
    refusals: [
      [{ url, [share]: 0 }, `upstreams.orders.${share} must be an integer from 1 to 100000, not 0`],
      [
        { url, [share]: 65 },
        `upstreams.orders.${share} must be at most maxConcurrent (64), not 65`,
      ],
      [
        { url, maxConcurrentPerSession: 8, [share]: 4 },
        `upstreams.orders.maxConcurrentPerSession must be at most ${share} (4), not 8`,
      ],
      ...more.refusals,
    ],
  };
}

const cases: Record<Share, ShareCases> = {
  maxConcurrentPerSession: {
    shares: ['maxConcurrentPerSession'],
    values: [
      [{ url }, [8]],
      [{ url, maxConcurrent: 800 }, [100]],
      [{ url, maxConcurrent: 15 }, [1]],
      [{ url, maxConcurrent: 1 }, [1]],
      [{ url, maxConcurrentPerSession: 64 }, [64]],
      [nats, [4]],
    ],
    refusals: [
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
    ],
  },
  maxConcurrentPerAddress: quarterShare('maxConcurrentPerAddress'),
  maxConcurrentPerUser: quarterShare('maxConcurrentPerUser', {
    values: [
      // Apart from the address's share: either may be the larger.
      [{ url, maxConcurrentPerAddress: 4, maxConcurrentPerUser: 32 }, [4, 32]],
      [{ url, maxConcurrentPerAddress: 32, maxConcurrentPerUser: 4 }, [4, 4]],
    ],
    refusals: [
      [
        { url, maxConcurrentPerUser: 1.5 },
        'upstreams.orders.maxConcurrentPerUser must be an integer from 1 to 100000, not 1.5',
      ],
      [
        { url, maxConcurrentPerSession: 8, maxConcurrentPerAddress: 16, maxConcurrentPerUser: 4 },
        'upstreams.orders.maxConcurrentPerSession must be at most maxConcurrentPerUser (4), not 8',
      ],
    ],
  }),
  // The slots kept for new callers: an eighth of maxConcurrent, 0 allowed, below maxConcurrent.
  reservedForNewCallers: {
    shares: ['reservedForNewCallers'],
    values: [
      [{ url }, [8]],
      [{ url, maxConcurrent: 800 }, [100]],
      [{ url, maxConcurrent: 15 }, [1]],
      [{ url, maxConcurrent: 7 }, [0]],
      [{ url, reservedForNewCallers: 0 }, [0]],
      [{ url, reservedForNewCallers: 63 }, [63]],
      [nats, [4]],
    ],
    refusals: [
      [
        { url, reservedForNewCallers: -1 },
        'upstreams.orders.reservedForNewCallers must be an integer from 0 to 100000, not -1',
      ],
      [
        { url, reservedForNewCallers: 64 },
        'upstreams.orders.reservedForNewCallers must be below maxConcurrent (64), not 64',
      ],
      [
        { url, maxConcurrent: 1, reservedForNewCallers: 1 },
        'upstreams.orders.reservedForNewCallers must be below maxConcurrent (1), not 1',
      ],
    ],
  },
};

describe.each(Object.entries(cases))('%s', (_, { shares, values, refusals }) => {
  it.each(values)(`of %j: ${shares.join(', ')} %j`, (orders, expected) => {
    expect(resolved(orders, shares)).toEqual(expected);
  });

  it.each(refusals)('refuses %j', (orders, message) => {
    expect(() => resolved(orders, shares)).toThrow(message);
  });
});
