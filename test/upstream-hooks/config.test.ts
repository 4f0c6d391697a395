import { describe, expect, it } from 'vitest';
import { hooksDefaults, resolveHooksConfig } from '../../src/upstream-hooks/hooks-config.js';

const upstreams = {
  auth: { url: 'http://auth:9000/rpc', timeoutMs: 700 },
  bus: { nats: { url: 'nats://nats:4222', subject: 'auth.rpc' } },
};
const resolve = (hooks: unknown) => resolveHooksConfig({ upstreams, hooks });

describe('resolveHooksConfig', () => {
  it('resolves no hooks without the section', () => {
    expect(resolveHooksConfig({ upstreams })).toEqual({});
  });

  it('fills in the defaults, the timeout from the upstream', () => {
    const config = resolve({
      connect: { upstream: 'auth' },
      subscribe: { upstream: 'auth', timeoutMs: 100, onFailure: 'allow', topics: ['private.*'] },
      events: { upstream: 'auth', events: ['disconnect', 'disconnect'] },
    });
    expect(config.connect).toMatchObject({ timeoutMs: 700, onFailure: 'refuse' });
    expect(config.connect?.upstream).toMatchObject({ name: 'auth', url: 'http://auth:9000/rpc' });
    expect(config.subscribe).toMatchObject({
      timeoutMs: 100,
      onFailure: 'allow',
      topics: ['private.*'],
    });
    expect(config.events).toMatchObject({
      events: ['disconnect'],
      maxQueued: hooksDefaults.maxQueued,
      retries: 5,
      batchSize: 100,
      flushIntervalMs: 1000,
    });
    expect(resolve({ subscribe: { upstream: 'auth' } }).subscribe?.topics).toEqual(['*']);
    expect(resolve({ events: { upstream: 'auth' } }).events?.events).toEqual([
      'connect',
      'disconnect',
      'subscribe',
      'unsubscribe',
    ]);
  });

  it.each([
    [[], TypeError, 'hooks must be an object ({ connect, subscribe, events }), not []'],
    [
      { conect: {} },
      TypeError,
      'hooks.conect is not an option of hooks (did you mean hooks.connect?)',
    ],
    [
      { connect: 'auth' },
      TypeError,
      'hooks.connect must be an object ({ upstream, ... }), not "auth"',
    ],
    [{ connect: {} }, TypeError, 'hooks.connect.upstream is required'],
    [
      { connect: { upstream: 7 } },
      TypeError,
      'hooks.connect.upstream must be the name of an upstream, not 7',
    ],
    [
      { connect: { upstream: 'nope' } },
      RangeError,
      'hooks.connect.upstream must name an HTTP upstream ("auth"), not "nope"',
    ],
    [
      { connect: { upstream: 'bus' } },
      RangeError,
      'hooks.connect.upstream must name an HTTP upstream ("auth"), not "bus"',
    ],
    [
      { connect: { upstream: 'auth', timeoutMs: 0 } },
      RangeError,
      'hooks.connect.timeoutMs must be an integer from 1 to 2147483647, not 0',
    ],
    [
      { connect: { upstream: 'auth', onFailure: 'open' } },
      RangeError,
      'hooks.connect.onFailure must be "refuse" or "allow", not "open"',
    ],
    [
      { connect: { upstream: 'auth', topics: [] } },
      TypeError,
      'hooks.connect.topics is not an option of hooks.connect',
    ],
    [
      { subscribe: { upstream: 'auth', topics: 'a.*' } },
      TypeError,
      'hooks.subscribe.topics must be an array of topic patterns',
    ],
    [
      { subscribe: { upstream: 'auth', topics: ['a*b'] } },
      TypeError,
      'hooks.subscribe.topics[0] must be an exact topic name or a prefix ending in "*", not "a*b"',
    ],
    [
      { subscribe: { upstream: 'auth', topics: ['ok', ''] } },
      TypeError,
      'hooks.subscribe.topics[1] must be',
    ],
    [
      { subscribe: { upstream: 'auth', onFailure: true } },
      TypeError,
      'hooks.subscribe.onFailure must be "refuse" or "allow", not true',
    ],
    [
      { events: { upstream: 'auth', events: [] } },
      TypeError,
      'hooks.events.events must be a non-empty array of connect, disconnect, subscribe, unsubscribe, not []',
    ],
    [
      { events: { upstream: 'auth', events: ['close'] } },
      RangeError,
      'hooks.events.events[0] must be "connect" or "disconnect" or "subscribe" or "unsubscribe", not "close"',
    ],
    [
      { events: { upstream: 'auth', maxQueued: 0 } },
      RangeError,
      'hooks.events.maxQueued must be an integer from 1 to 1000000, not 0',
    ],
    [
      { events: { upstream: 'auth', maxQueued: 1.5 } },
      RangeError,
      'hooks.events.maxQueued must be an integer from 1 to 1000000, not 1.5',
    ],
    [
      { events: { upstream: 'auth', retries: 21 } },
      RangeError,
      'hooks.events.retries must be an integer from 0 to 20, not 21',
    ],
    [
      { events: { upstream: 'auth', batchSize: 1001 } },
      RangeError,
      'hooks.events.batchSize must be an integer from 1 to 1000, not 1001',
    ],
    [
      { events: { upstream: 'auth', flushIntervalMs: 5 } },
      RangeError,
      'hooks.events.flushIntervalMs must be an integer from 10 to 60000, not 5',
    ],
    [
      { events: { upstream: 'auth', onFailure: 'allow' } },
      TypeError,
      'hooks.events.onFailure is not an option of hooks.events',
    ],
  ])('refuses %j', (hooks, type, message) => {
    expect(() => resolve(hooks)).toThrow(type);
    expect(() => resolve(hooks)).toThrow(message);
  });

  it('refuses a hook naming an upstream when none is declared, and a file that is not an object', () => {
    expect(() => resolveHooksConfig({ hooks: { connect: { upstream: 'auth' } } })).toThrow(
      'hooks.connect.upstream must name an HTTP upstream (no HTTP upstream is declared), not "auth"',
    );
    // Declared, but over NATS: a hook is an HTTP request.
    expect(() =>
      resolveHooksConfig({
        upstreams: { auth: { nats: { url: 'nats://127.0.0.1:4222', subject: 'auth.rpc' } } },
        hooks: { connect: { upstream: 'auth' } },
      }),
    ).toThrow(
      'hooks.connect.upstream must name an HTTP upstream (no HTTP upstream is declared), not "auth" ("auth" is a NATS upstream)',
    );
    expect(() => resolveHooksConfig(null)).toThrow('the configuration must be an object, not null');
  });
});
