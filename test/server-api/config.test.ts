/**
 * resolveServerApiConfig: the defaults, and every invalid option refused with a message naming
 * its full path in the file and what it may be.
 */
import { describe, expect, it } from 'vitest';
import { resolveServerApiConfig, serverApiDefaults } from '../../src/server-api/index.js';

const KEY = 'k'.repeat(16);
const base = { listen: { port: 8081 }, keys: [KEY] };

describe('resolveServerApiConfig', () => {
  it('fills in the defaults', () => {
    const config = resolveServerApiConfig(base);
    expect(config).toMatchObject({
      listen: {
        host: '127.0.0.1',
        port: 8081,
        maxHttpSockets: 2_000,
        maxHttpSocketsPerIp: 200,
        headersTimeoutMs: 10_000,
      },
      path: undefined,
      keys: [KEY],
      jwt: undefined,
      consume: undefined,
      idempotencyWindowMs: serverApiDefaults.idempotencyWindowMs,
      maxBodyBytes: serverApiDefaults.maxBodyBytes,
      callTimeoutMs: serverApiDefaults.callTimeoutMs,
      maxCallTimeoutMs: serverApiDefaults.maxCallTimeoutMs,
      countWindowMs: serverApiDefaults.countWindowMs,
      maxPendingCalls: serverApiDefaults.maxPendingCalls,
      maxPendingCallsPerCaller: serverApiDefaults.maxPendingCalls / 4,
      maxHistoryLimit: serverApiDefaults.maxHistoryLimit,
      maxHistoryBytes: serverApiDefaults.maxHistoryBytes,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(
      resolveServerApiConfig({
        ...base,
        listen: { port: 1, maxHttpSockets: 3, maxHttpSocketsPerIp: 2, headersTimeoutMs: 5 },
      }).listen,
    ).toEqual({
      host: '127.0.0.1',
      port: 1,
      maxHttpSockets: 3,
      maxHttpSocketsPerIp: 2,
      headersTimeoutMs: 5,
    });
    // A caller's share follows maxPendingCalls: a quarter, at least 1.
    for (const [maxPendingCalls, share] of [
      [100, 25],
      [3, 1],
      [1, 1],
    ] as const) {
      expect(resolveServerApiConfig({ ...base, maxPendingCalls }).maxPendingCallsPerCaller).toBe(
        share,
      );
    }
    expect(
      resolveServerApiConfig({ ...base, maxPendingCallsPerCaller: 7 }).maxPendingCallsPerCaller,
    ).toBe(7);
    expect(resolveServerApiConfig({ path: '/api', jwt: { secret: 'x' } })).toMatchObject({
      path: '/api',
      listen: undefined,
      keys: [],
    });
    expect(
      resolveServerApiConfig({ ...base, consume: { redisStream: 'wsrpc:api' } }).consume,
    ).toEqual({
      kind: 'redis',
      stream: 'wsrpc:api',
      group: 'wsrpc-gateway',
      url: undefined,
      maxConcurrent: 64,
      claimIdleMs: 60_000,
      maxDeliveries: 5,
      deadLetterStream: 'wsrpc:api:dead-letter',
      readiness: true,
    });
    expect(
      resolveServerApiConfig({ ...base, consume: { redisStream: 's', claimIdleMs: 1_000 } })
        .consume,
    ).toMatchObject({ kind: 'redis', claimIdleMs: 1_000 });
    expect(
      resolveServerApiConfig({
        ...base,
        consume: { redisStream: 's', maxDeliveries: 1, deadLetterStream: 'dead' },
      }).consume,
    ).toMatchObject({ maxDeliveries: 1, deadLetterStream: 'dead' });
    expect(
      resolveServerApiConfig({ ...base, consume: { redisStream: 's', deadLetterStream: false } })
        .consume,
    ).toMatchObject({ deadLetterStream: undefined });
    expect(
      resolveServerApiConfig({
        ...base,
        consume: { natsSubject: 'wsrpc.api', group: 'g', url: 'nats://n:4222' },
      }).consume,
    ).toEqual({
      kind: 'nats',
      subject: 'wsrpc.api',
      queue: 'g',
      url: 'nats://n:4222',
      maxConcurrent: 64,
      maxQueued: 256,
      readiness: true,
    });
    expect(
      resolveServerApiConfig({
        ...base,
        consume: { natsSubject: 'wsrpc.api', maxConcurrent: 1, maxQueued: 0, readiness: false },
      }).consume,
    ).toMatchObject({ maxConcurrent: 1, maxQueued: 0, readiness: false });
  });

  const refused: [string, unknown, RegExp][] = [
    ['not an object', 'yes', /^serverApi must be an object, not "yes"$/],
    [
      'an unknown key',
      { ...base, kyes: [] },
      /^serverApi\.kyes is not an option of serverApi \(did you mean serverApi\.keys\?\)$/,
    ],
    [
      'no credentials',
      { listen: { port: 1 } },
      /serverApi needs serverApi\.keys .* or serverApi\.jwt .*never open/,
    ],
    ['empty keys and no jwt', { listen: { port: 1 }, keys: [] }, /never open/],
    [
      'neither listen nor path',
      { keys: [KEY] },
      /exactly one of serverApi\.listen .* and serverApi\.path/,
    ],
    ['both listen and path', { ...base, path: '/api' }, /exactly one of serverApi\.listen/],
    ['keys not an array', { ...base, keys: KEY }, /^serverApi\.keys must be an array of strings/],
    [
      'a key not a string',
      { ...base, keys: [5] },
      /^serverApi\.keys\[0\] must be a string of at least 16 characters, not a number$/,
    ],
    [
      'a short key',
      { ...base, keys: [KEY, 'short'] },
      /^serverApi\.keys\[1\] must be a string of at least 16 characters, not one of 5$/,
    ],
    [
      'jwt not an object',
      { ...base, jwt: 'secret' },
      /^serverApi\.jwt must be an object, not "secret"$/,
    ],
    ['a bad path', { path: 'api', keys: [KEY] }, /^serverApi\.path /],
    [
      'listen not an object',
      { listen: 8081, keys: [KEY] },
      /^serverApi\.listen must be an object, not 8081$/,
    ],
    [
      'listen without port',
      { listen: { host: '0.0.0.0' }, keys: [KEY] },
      /^serverApi\.listen\.port must be an integer from 0 to 65535, not undefined$/,
    ],
    [
      'a port out of range',
      { listen: { port: 70000 }, keys: [KEY] },
      /^serverApi\.listen\.port must be an integer from 0 to 65535, not 70000$/,
    ],
    [
      'an empty host',
      { listen: { port: 1, host: '' }, keys: [KEY] },
      /^serverApi\.listen\.host must be a non-empty string, not ""$/,
    ],
    [
      'an unknown listen key',
      { listen: { port: 1, hots: 'x' }, keys: [KEY] },
      /^serverApi\.listen\.hots is not an option/,
    ],
    [
      'listen.maxHttpSockets 0',
      { listen: { port: 1, maxHttpSockets: 0 }, keys: [KEY] },
      /^serverApi\.listen\.maxHttpSockets must be an integer at least 1, not 0$/,
    ],
    [
      'listen.maxHttpSocketsPerIp fractional',
      { listen: { port: 1, maxHttpSocketsPerIp: 1.5 }, keys: [KEY] },
      /^serverApi\.listen\.maxHttpSocketsPerIp must be an integer at least 1, not 1\.5$/,
    ],
    [
      'listen.maxHttpSockets Infinity',
      { listen: { port: 1, maxHttpSockets: Infinity }, keys: [KEY] },
      /^serverApi\.listen\.maxHttpSockets must be an integer at least 1/,
    ],
    [
      "listen.headersTimeoutMs over a timer's delay",
      { listen: { port: 1, headersTimeoutMs: 2 ** 31 }, keys: [KEY] },
      /^serverApi\.listen\.headersTimeoutMs must be an integer from 1 to 2147483647, not 2147483648$/,
    ],
    [
      "a socket bound with path (the gateway's limits apply there)",
      { path: '/api', keys: [KEY], maxHttpSockets: 5 },
      /^serverApi\.maxHttpSockets is not an option of serverApi/,
    ],
    [
      'idempotencyWindowMs 0',
      { ...base, idempotencyWindowMs: 0 },
      /^serverApi\.idempotencyWindowMs must be an integer from 1 to 86400000, not 0$/,
    ],
    [
      'idempotencyWindowMs over a day',
      { ...base, idempotencyWindowMs: 86_400_001 },
      /idempotencyWindowMs must be an integer from 1 to 86400000/,
    ],
    [
      'maxBodyBytes a string',
      { ...base, maxBodyBytes: '1mb' },
      /^serverApi\.maxBodyBytes must be an integer from 1 to 1073741824, not "1mb"$/,
    ],
    [
      'bodyTimeoutMs negative',
      { ...base, bodyTimeoutMs: -5 },
      /^serverApi\.bodyTimeoutMs must be an integer from 1 to 2147483647, not -5$/,
    ],
    [
      'callTimeoutMs fractional',
      { ...base, callTimeoutMs: 1.5 },
      /^serverApi\.callTimeoutMs must be an integer/,
    ],
    [
      'callTimeoutMs over maxCallTimeoutMs',
      { ...base, callTimeoutMs: 5000, maxCallTimeoutMs: 1000 },
      /^serverApi\.callTimeoutMs must be at most serverApi\.maxCallTimeoutMs \(1000\), not 5000$/,
    ],
    [
      'countWindowMs too long',
      { ...base, countWindowMs: 60_001 },
      /^serverApi\.countWindowMs must be an integer from 1 to 60000/,
    ],
    [
      'maxPendingCalls 0',
      { ...base, maxPendingCalls: 0 },
      /^serverApi\.maxPendingCalls must be an integer from 1 to 1000000, not 0$/,
    ],
    [
      'maxPendingCallsPerCaller over maxPendingCalls',
      { ...base, maxPendingCalls: 10, maxPendingCallsPerCaller: 11 },
      /^serverApi\.maxPendingCallsPerCaller must be at most serverApi\.maxPendingCalls \(10\), not 11$/,
    ],
    [
      'maxPendingCallsPerCaller over the default maxPendingCalls',
      { ...base, maxPendingCallsPerCaller: 10_001 },
      /^serverApi\.maxPendingCallsPerCaller must be at most serverApi\.maxPendingCalls \(10000\), not 10001$/,
    ],
    [
      'maxHistoryLimit too large',
      { ...base, maxHistoryLimit: 100_001 },
      /^serverApi\.maxHistoryLimit must be an integer from 1 to 100000/,
    ],
    [
      'consume not an object',
      { ...base, consume: 'redis' },
      /^serverApi\.consume must be an object/,
    ],
    [
      'consume with neither',
      { ...base, consume: {} },
      /^serverApi\.consume needs exactly one of serverApi\.consume\.redisStream and serverApi\.consume\.natsSubject$/,
    ],
    [
      'consume with both',
      { ...base, consume: { redisStream: 'a', natsSubject: 'b' } },
      /exactly one of serverApi\.consume\.redisStream/,
    ],
    [
      'an empty stream',
      { ...base, consume: { redisStream: '' } },
      /^serverApi\.consume\.redisStream must be a non-empty string, not ""$/,
    ],
    [
      'a wildcard subject',
      { ...base, consume: { natsSubject: 'api.>' } },
      /^serverApi\.consume\.natsSubject must be a NATS subject without spaces or wildcards, not "api\.>"$/,
    ],
    [
      'an unknown consume key',
      { ...base, consume: { redisStream: 'a', grup: 'g' } },
      /^serverApi\.consume\.grup is not an option of serverApi\.consume \(did you mean serverApi\.consume\.group\?\)$/,
    ],
    [
      'a url not a string',
      { ...base, consume: { redisStream: 'a', url: 6379 } },
      /^serverApi\.consume\.url must be a non-empty string, not 6379$/,
    ],
    [
      'consume.maxConcurrent 0',
      { ...base, consume: { redisStream: 'a', maxConcurrent: 0 } },
      /^serverApi\.consume\.maxConcurrent must be an integer from 1 to 10000, not 0$/,
    ],
    [
      'consume.maxConcurrent not an integer',
      { ...base, consume: { natsSubject: 'a', maxConcurrent: 1.5 } },
      /^serverApi\.consume\.maxConcurrent must be an integer from 1 to 10000, not 1\.5$/,
    ],
    [
      'consume.maxQueued too large',
      { ...base, consume: { natsSubject: 'a', maxQueued: 100_001 } },
      /^serverApi\.consume\.maxQueued must be an integer from 0 to 100000, not 100001$/,
    ],
    [
      'consume.readiness not a boolean',
      { ...base, consume: { redisStream: 'a', readiness: 'no' } },
      /^serverApi\.consume\.readiness must be true or false, not "no"$/,
    ],
    [
      'consume.claimIdleMs below a second',
      { ...base, consume: { redisStream: 'a', claimIdleMs: 999 } },
      /^serverApi\.consume\.claimIdleMs must be an integer from 1000 to 86400000, not 999$/,
    ],
    [
      'consume.claimIdleMs for a NATS subject',
      { ...base, consume: { natsSubject: 'a', claimIdleMs: 5_000 } },
      /^serverApi\.consume\.claimIdleMs applies to serverApi\.consume\.redisStream only: NATS keeps no unacknowledged request$/,
    ],
    [
      'consume.maxDeliveries of 0',
      { ...base, consume: { redisStream: 'a', maxDeliveries: 0 } },
      /^serverApi\.consume\.maxDeliveries must be an integer from 1 to 1000, not 0$/,
    ],
    [
      'consume.deadLetterStream the stream itself',
      { ...base, consume: { redisStream: 'a', deadLetterStream: 'a' } },
      /^serverApi\.consume\.deadLetterStream must be another key than the stream, not "a"$/,
    ],
    [
      'consume.deadLetterStream empty',
      { ...base, consume: { redisStream: 'a', deadLetterStream: '' } },
      /^serverApi\.consume\.deadLetterStream must be a stream key or false, not ""$/,
    ],
    [
      'consume.maxDeliveries for a NATS subject',
      { ...base, consume: { natsSubject: 'a', maxDeliveries: 3 } },
      /^serverApi\.consume\.maxDeliveries applies to serverApi\.consume\.redisStream only: NATS keeps no unacknowledged request$/,
    ],
    [
      'consume.maxQueued for a Redis stream',
      { ...base, consume: { redisStream: 'a', maxQueued: 10 } },
      /^serverApi\.consume\.maxQueued applies to serverApi\.consume\.natsSubject only: a Redis stream's entries wait in the stream$/,
    ],
  ];
  for (const [what, value, message] of refused) {
    it(`refuses ${what}`, () => {
      expect(() => resolveServerApiConfig(value)).toThrow(message);
    });
  }

  it('names the section where the file has it', () => {
    expect(() =>
      resolveServerApiConfig({ ...base, bodyTimeoutMs: 0 }, 'gateway.yaml: serverApi.'),
    ).toThrow(/^gateway\.yaml: serverApi\.bodyTimeoutMs must be/);
  });
});
