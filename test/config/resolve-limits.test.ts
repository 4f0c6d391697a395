import { describe, expect, it } from 'vitest';
import { createGateway, defaultLimits } from '../../src/index.js';
import { limitRules, resolveLimits } from '../../src/server/options.js';
import type { GatewayLimits } from '../../src/server/options.js';

describe('resolveLimits: the one step that checks the gateway limits', () => {
  it('gives the defaults, overridden by what is set', () => {
    expect(resolveLimits()).toEqual(defaultLimits);
    expect(resolveLimits({ maxBatch: 7, ratePerSecond: 0 })).toEqual({
      ...defaultLimits,
      maxBatch: 7,
      ratePerSecond: 0,
    });
  });

  it('has a rule for every default', () => {
    expect(Object.keys(limitRules).sort()).toEqual(Object.keys(defaultLimits).sort());
  });

  it('names the limit that is unknown, not a number, or out of range', () => {
    expect(() => resolveLimits({ maxBatchs: 3 } as GatewayLimits)).toThrow(
      new TypeError('limits.maxBatchs is not an option of limits (did you mean limits.maxBatch?)'),
    );
    expect(() => resolveLimits({ maxBatch: '3' as unknown as number })).toThrow(
      new TypeError('limits.maxBatch must be a number, not "3"'),
    );
    expect(() => resolveLimits({ maxBatch: Number.NaN })).toThrow(TypeError);
    expect(() => resolveLimits({ maxBatch: 0 })).toThrow(
      new RangeError('limits.maxBatch must be an integer at least 1, not 0'),
    );
    expect(() => resolveLimits({ maxConnections: 1.5 })).toThrow(RangeError);
    expect(() => resolveLimits({ maxInFlight: Infinity })).toThrow(RangeError);
    expect(() => resolveLimits({ ratePerSecond: -1 })).toThrow(RangeError);
  });

  it('createGateway refuses bad limits before it listens', () => {
    expect(() => createGateway({ limits: { maxSubscriptions: -1 } })).toThrow(
      new RangeError('limits.maxSubscriptions must be an integer at least 0, not -1'),
    );
  });
});
