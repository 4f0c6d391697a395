import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { gatewayDefaults, resolveGatewayOptions } from '../../src/server/gateway-config.js';

const resolve = (identity: unknown) =>
  resolveGatewayOptions({ logger: silentLogger, identity }).identity;

describe('the identity option', () => {
  it('defaults: upgrades authenticate, 10 s in-band deadline, refresh asked 30 s ahead, no hooks', () => {
    expect(resolve(undefined)).toEqual({
      inBand: false,
      inBandDeadlineMs: 10_000,
      refreshAheadMs: 30_000,
      expiresAtOf: undefined,
      topicsOf: undefined,
      methodsOf: undefined,
      issuedAtOf: undefined,
    });
    expect(gatewayDefaults.identity).toEqual({
      inBand: false,
      inBandDeadlineMs: 10_000,
      refreshAheadMs: 30_000,
    });
  });

  it('takes every key, hooks kept as given', () => {
    const topicsOf = () => ['a.*'];
    const resolved = resolve({ inBand: true, inBandDeadlineMs: 500, refreshAheadMs: 0, topicsOf });
    expect(resolved).toMatchObject({
      inBand: true,
      inBandDeadlineMs: 500,
      refreshAheadMs: 0,
      topicsOf,
    });
    expect(Object.isFrozen(resolved)).toBe(true);
  });

  it.each([
    [true, TypeError, 'identity must be an object'],
    [
      { inband: true },
      TypeError,
      'identity.inband is not an option of identity (did you mean identity.inBand?)',
    ],
    [{ inBand: 'yes' }, TypeError, 'identity.inBand must be a boolean, not "yes"'],
    [
      { inBandDeadlineMs: 50 },
      RangeError,
      'identity.inBandDeadlineMs must be an integer from 100 to 300000, not 50',
    ],
    [
      { inBandDeadlineMs: 1.5 },
      RangeError,
      'identity.inBandDeadlineMs must be an integer from 100 to 300000',
    ],
    [
      { refreshAheadMs: -1 },
      RangeError,
      'identity.refreshAheadMs must be an integer from 0 to 2147483647, not -1',
    ],
    [{ expiresAtOf: 3600 }, TypeError, 'identity.expiresAtOf must be a function, not 3600'],
    [{ topicsOf: ['a.*'] }, TypeError, 'identity.topicsOf must be a function'],
    [{ methodsOf: 'echo' }, TypeError, 'identity.methodsOf must be a function'],
    [{ issuedAtOf: null }, TypeError, 'identity.issuedAtOf must be a function, not null'],
  ])('refuses %j naming the key and the allowed values', (identity, type, message) => {
    expect(() => resolve(identity)).toThrow(type);
    expect(() => resolve(identity)).toThrow(message);
  });
});
