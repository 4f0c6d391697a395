// The hooks' per-client bounds as a configuration file gives them: defaults from the upstream's
// maxConcurrent, and never more than it.
import { describe, expect, it } from 'vitest';
import { resolveHooksConfig } from '../../src/upstream-hooks/hooks-config.js';

const resolve = (auth: Record<string, unknown>, hooks: unknown) =>
  resolveHooksConfig({ upstreams: { auth: { url: 'http://auth:9000/rpc', ...auth } }, hooks });

describe('the hooks per-client bounds', () => {
  it('default to a share of the upstream', () => {
    const hooks = { connect: { upstream: 'auth' }, subscribe: { upstream: 'auth' } };
    expect(resolve({}, hooks)).toMatchObject({
      connect: { maxConcurrentPerAddress: 8 },
      subscribe: { maxConcurrentPerSession: 4, maxQueuedPerSession: 256 },
    });
    expect(resolve({ maxConcurrent: 16 }, hooks)).toMatchObject({
      connect: { maxConcurrentPerAddress: 2 },
      subscribe: { maxConcurrentPerSession: 4 },
    });
    expect(resolve({ maxConcurrent: 3 }, hooks)).toMatchObject({
      connect: { maxConcurrentPerAddress: 1 },
      subscribe: { maxConcurrentPerSession: 3 },
    });
  });

  it('take given values', () => {
    expect(
      resolve(
        {},
        {
          connect: { upstream: 'auth', maxConcurrentPerAddress: 64 },
          subscribe: { upstream: 'auth', maxConcurrentPerSession: 1, maxQueuedPerSession: 0 },
        },
      ),
    ).toMatchObject({
      connect: { maxConcurrentPerAddress: 64 },
      subscribe: { maxConcurrentPerSession: 1, maxQueuedPerSession: 0 },
    });
  });

  it.each([
    [
      { connect: { upstream: 'auth', maxConcurrentPerAddress: 65 } },
      'hooks.connect.maxConcurrentPerAddress must be at most the maxConcurrent of upstream "auth" (64), not 65',
    ],
    [
      { connect: { upstream: 'auth', maxConcurrentPerAddress: 0 } },
      'hooks.connect.maxConcurrentPerAddress must be an integer from 1 to 100000, not 0',
    ],
    [
      { subscribe: { upstream: 'auth', maxConcurrentPerSession: 65 } },
      'hooks.subscribe.maxConcurrentPerSession must be at most the maxConcurrent of upstream "auth" (64), not 65',
    ],
    [
      { subscribe: { upstream: 'auth', maxQueuedPerSession: -1 } },
      'hooks.subscribe.maxQueuedPerSession must be an integer from 0 to 100000, not -1',
    ],
    [
      { events: { upstream: 'auth', maxConcurrentPerSession: 2 } },
      'hooks.events.maxConcurrentPerSession is not an option of hooks.events',
    ],
  ])('refuses %j', (hooks, message) => {
    expect(() => resolve({}, hooks)).toThrow(message);
  });
});
