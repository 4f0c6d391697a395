// A misspelled key under `limits`, `userInbox` or `clusterEvents` is refused naming the nearest
// known key, as every other unknown option is (docs/options.md): by createGateway, and by
// check-config through the same resolver.
import { expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { createGateway } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import { examineStandaloneConfig } from '../../src/standalone/standalone-config.js';

const userOf = (): string => 'a';

it.each([
  [
    { limits: { maxBatchh: 3 } },
    'limits.maxBatchh is not an option of limits (did you mean limits.maxBatch?)',
  ],
  [
    { limits: { maxMesageBytes: 3 } },
    'limits.maxMesageBytes is not an option of limits (did you mean limits.maxMessageBytes?)',
  ],
  [{ limits: { nothingLikeIt: 3 } }, 'limits.nothingLikeIt is not an option of limits'],
  [
    { clusterEvents: { leaseM: 1_000 } },
    'clusterEvents.leaseM is not an option of clusterEvents (did you mean clusterEvents.leaseMs?)',
  ],
  [{ clusterEvents: { prefx: 'x' } }, 'clusterEvents.prefx is not an option of clusterEvents'],
  [
    { userInbox: { maxLenght: 10 }, userOf },
    'userInbox.maxLenght is not an option of userInbox (did you mean userInbox.maxLength?)',
  ],
  [
    { userInbox: { holdMS: 10 }, userOf },
    'userInbox.holdMS is not an option of userInbox (did you mean userInbox.holdMs?)',
  ],
])('createGateway(%j): a TypeError naming the nearest known key', (options, message) => {
  expect(() =>
    createGateway({ ...options, logger: silentLogger } as GatewayOptions<unknown>),
  ).toThrow(new TypeError(message));
});

it('check-config: the same message, at the path in the file', () => {
  const { problems } = examineStandaloneConfig(
    { limits: { maxBatchh: 3 }, clusterEvents: { leaseM: 1_000 } },
    'gateway.yaml',
  );
  expect(problems.map((problem) => problem.message)).toEqual([
    'limits.maxBatchh is not an option of limits (did you mean limits.maxBatch?)',
    'clusterEvents.leaseM is not an option of clusterEvents (did you mean clusterEvents.leaseMs?)',
  ]);
});
