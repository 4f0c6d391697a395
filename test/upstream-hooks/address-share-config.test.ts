// hooks.subscribe.maxConcurrentPerAddress as a configuration file gives it: a quarter of the
// upstream's maxConcurrent by default, never below the hook's per-session share, never above the
// upstream's maxConcurrent.
import { describe, expect, it } from 'vitest';
import { resolveHooksConfig } from '../../src/upstream-hooks/hooks-config.js';

const subscribe = (auth: Record<string, unknown>, hook: Record<string, unknown> = {}) => {
  const config = resolveHooksConfig({
    upstreams: { auth: { url: 'http://auth:9000/rpc', ...auth } },
    hooks: { subscribe: { upstream: 'auth', ...hook } },
  }).subscribe!;
  return [config.maxConcurrentPerSession, config.maxConcurrentPerAddress];
};

describe("the subscribe hook's share per address", () => {
  it.each([
    [{}, {}, [4, 16]],
    [{ maxConcurrent: 16 }, {}, [4, 4]],
    [{ maxConcurrent: 3 }, {}, [3, 3]],
    [{ maxConcurrent: 400 }, {}, [4, 100]],
    [{}, { maxConcurrentPerSession: 32 }, [32, 32]],
    [{}, { maxConcurrentPerAddress: 64 }, [4, 64]],
    [{}, { maxConcurrentPerAddress: 2 }, [2, 2]],
    [{}, { maxConcurrentPerSession: 1, maxConcurrentPerAddress: 1 }, [1, 1]],
  ])('upstream %j, hook %j: [per session, per address] %j', (auth, hook, expected) => {
    expect(subscribe(auth, hook)).toEqual(expected);
  });

  it.each([
    [
      { maxConcurrentPerAddress: 0 },
      'hooks.subscribe.maxConcurrentPerAddress must be an integer from 1 to 100000, not 0',
    ],
    [
      { maxConcurrentPerAddress: 65 },
      'hooks.subscribe.maxConcurrentPerAddress must be at most the maxConcurrent of upstream "auth" (64), not 65',
    ],
    [
      { maxConcurrentPerSession: 8, maxConcurrentPerAddress: 4 },
      'hooks.subscribe.maxConcurrentPerSession must be at most hooks.subscribe.maxConcurrentPerAddress (4), not 8',
    ],
  ])('refuses %j', (hook, message) => {
    expect(() => subscribe({}, hook)).toThrow(message);
  });
});
