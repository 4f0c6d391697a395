import { of } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { silentLogger } from '../../src/peer/logger.js';
import { method } from '../../src/peer/method-descriptor.js';
import { MethodRegistry } from '../../src/peer/method-registry.js';
import { implementContract } from '../../src/server/contract-server.js';
import { createGateway } from '../../src/server/gateway.js';
import type { Gateway } from '../../src/server/gateway.js';

/*
 * A mistake in registering a method, a topic or a stream throws at the line that made it,
 * naming what is wrong (a TypeError for a wrong type, a RangeError for a wrong value), and
 * leaves the gateway as it was: it is not found later as -32603 on every call, or as a topic
 * nobody can reach.
 */

const gateways: Gateway<unknown>[] = [];
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.close()));
});

function gateway(): Gateway<unknown> {
  const made = createGateway({ logger: silentLogger, heartbeatIntervalMs: 0 });
  gateways.push(made);
  return made;
}

/** A value the types would refuse, as a JavaScript caller may pass it. */
const bad = (value: unknown): never => value as never;

describe('gateway.method', () => {
  it('refuses a handler that is not a function, and registers nothing', () => {
    const g = gateway();
    expect(() => g.method('x', bad(42))).toThrow(
      new TypeError('method "x": handler must be a function, not 42'),
    );
    expect(() => g.method('y', bad(undefined))).toThrow(
      new TypeError('method "y": handler must be a function, not undefined'),
    );
    expect(() => g.method(method('z'), bad({ handle: () => 1 }))).toThrow(TypeError);
    expect(g.registry.has('x')).toBe(false);
    // The name is still free for the right handler.
    expect(() => g.method('x', () => 1)).not.toThrow();
  });

  it('refuses a name that is not a string, or is empty', () => {
    const g = gateway();
    expect(() => g.method(bad(42), () => 1)).toThrow(
      new TypeError(
        'method name must be a non-empty string, not starting with "rpc." (reserved), not 42',
      ),
    );
    expect(() => g.method(bad(null), () => 1)).toThrow(TypeError);
    expect(() => g.method(bad({ kind: 'method' }), () => 1)).toThrow(TypeError);
    // A function has a `name`, but is not a descriptor: the name was left out.
    expect(() =>
      g.method(
        bad(function handler() {}),
        () => 1,
      ),
    ).toThrow(TypeError);
    expect(() => g.method('', () => 1)).toThrow(
      new RangeError(
        'method name must be a non-empty string, not starting with "rpc." (reserved), not ""',
      ),
    );
    expect(() => g.method(method(''), () => 1)).toThrow(RangeError);
    expect(g.registry.has('')).toBe(false);
  });

  it('refuses the reserved rpc. names with a RangeError, and keeps a name registered twice refused', () => {
    const g = gateway();
    expect(() => g.method('rpc.mine', () => 1)).toThrow(
      new RangeError(
        'method name must be a non-empty string, not starting with "rpc." (reserved), not "rpc.mine"',
      ),
    );
    g.method('twice', () => 1);
    expect(() => g.method('twice', () => 2)).toThrow('Method "twice" is already registered');
  });

  it('refuses a prefix route with a "*", a handler that is not a function, or a prefix that is not a string', () => {
    const registry = new MethodRegistry<unknown>();
    expect(() => registry.prefix('orders.*', () => 1)).toThrow(
      new RangeError(
        'method prefix must be the start of method names, without "*", not "orders.*"',
      ),
    );
    expect(() => registry.prefix('orders.', bad(42))).toThrow(
      new TypeError('method prefix "orders.*": handler must be a function, not 42'),
    );
    expect(() => registry.prefix(bad(7), () => 1)).toThrow(
      new TypeError('method prefix must be a string, not 7'),
    );
    expect(() => registry.prefix('rpc.', () => 1)).toThrow(RangeError);
    expect(registry.get('orders.list')).toBeUndefined();
    // The empty prefix (a route "*") is every name: allowed.
    expect(() => registry.prefix('', () => 1)).not.toThrow();
  });
});

describe('gateway.topic', () => {
  it('refuses a pattern with a "*" anywhere but at its end', () => {
    const g = gateway();
    for (const pattern of ['a*b', '*.x', 'room.**', 'a*b*']) {
      expect(() => g.topic(pattern)).toThrow(
        new RangeError(
          `topic pattern must be an exact name or a prefix ending in "*" (no "*" elsewhere), not "${pattern}"`,
        ),
      );
      expect(g.pubsub.topicPattern(pattern)).toBeUndefined();
    }
    // What is valid stays valid: exact names, prefixes, and "*" alone (every name).
    expect(() => g.topic('room.*')).not.toThrow();
    expect(() => g.topic('room')).not.toThrow();
    expect(() => g.topic('chat*')).not.toThrow();
    expect(() => g.topic('*')).not.toThrow();
  });

  it('refuses an empty pattern, and one that is not a string', () => {
    const g = gateway();
    expect(() => g.topic('')).toThrow(RangeError);
    expect(() => g.topic(bad(42))).toThrow(
      new TypeError(
        'topic pattern must be a string, an exact name or a prefix ending in "*" (no "*" elsewhere), not 42',
      ),
    );
  });

  it('refuses options that are not an object, and an authorize that is not a function', () => {
    const g = gateway();
    expect(() => g.topic('a', bad(42))).toThrow(
      new TypeError('topic "a": options must be an object, not 42'),
    );
    expect(() => g.topic('b', bad(null))).toThrow(
      new TypeError('topic "b": options must be an object, not null'),
    );
    expect(() => g.topic('c', bad({ authorize: true }))).toThrow(
      new TypeError('topic "c": authorize must be a function, not true'),
    );
    expect(g.pubsub.topicPattern('a')).toBeUndefined();
    expect(g.pubsub.topicPattern('c')).toBeUndefined();
  });

  it('refuses a name already declared as a stream, either way round', () => {
    const g = gateway();
    g.topic('n');
    expect(() => g.stream('n', () => of(1))).toThrow(
      'Stream "n" is already declared as a topic: a name is a topic or a stream, not both',
    );
    g.stream('s', () => of(1));
    expect(() => g.topic('s')).toThrow(
      'Topic "s" is already declared as a stream: a name is a topic or a stream, not both',
    );
    expect(g.pubsub.topicPattern('s')).toBeUndefined();
    // A prefix topic beside a stream of one of its names is not the same name: allowed.
    g.topic('feed.*');
    expect(() => g.stream('feed.live', () => of(1))).not.toThrow();
  });
});

describe('gateway.stream', () => {
  it('refuses a handler that is not a function, and flow that is not an object', () => {
    const g = gateway();
    expect(() => g.stream('s', bad(42))).toThrow(
      new TypeError('stream "s": handler must be a function, not 42'),
    );
    expect(() => g.stream('s', () => of(1), bad('drop'))).toThrow(
      new TypeError('stream "s": flow must be an object, not "drop"'),
    );
    // Nothing was declared: the name is free.
    expect(() => g.stream('s', () => of(1))).not.toThrow();
  });

  it('refuses a name that is empty, holds "*", or is not a string', () => {
    const g = gateway();
    expect(() => g.stream('feed.*', () => of(1))).toThrow(
      new RangeError(
        'stream name must be an exact name, not empty and without "*" (a prefix pattern can only be a topic), not "feed.*"',
      ),
    );
    expect(() => g.stream('', () => of(1))).toThrow(RangeError);
    expect(() => g.stream(bad(1), () => of(1))).toThrow(TypeError);
  });
});

describe('implementContract', () => {
  const contract = defineContract({
    name: 'shop',
    version: '1.0.0',
    methods: { 'cart.add': { params: z.object({ sku: z.string() }) }, ping: {} },
    subscriptions: { feed: { data: z.number() }, 'room.*': { data: z.string() } },
  });

  it('refuses a handler that is not a function, naming it, and registers nothing', () => {
    const g = gateway();
    expect(() =>
      implementContract(g, contract, bad({ methods: { 'cart.add': () => 1, ping: 42 } })),
    ).toThrow(new TypeError('implementation.methods["ping"] must be a function, not 42'));
    expect(g.registry.has('cart.add')).toBe(false);
  });

  it('refuses an implementation, methods or options that are not objects', () => {
    const g = gateway();
    expect(() => implementContract(g, contract, bad(undefined))).toThrow(
      new TypeError('implementation must be an object, not undefined'),
    );
    expect(() => implementContract(g, contract, bad({}))).toThrow(
      new TypeError('implementation.methods must be an object of handlers, not undefined'),
    );
    const methods = { 'cart.add': () => 1, ping: () => 2 };
    expect(() => implementContract(g, contract, { methods }, bad(true))).toThrow(
      new TypeError('options must be an object, not true'),
    );
    expect(g.registry.has('ping')).toBe(false);
  });

  it('refuses a stream or topic options under a name the contract lacks, or a stream that is not a function', () => {
    const g = gateway();
    const methods = { 'cart.add': () => 1, ping: () => 2 };
    expect(() =>
      implementContract(g, contract, bad({ methods, streams: { fed: () => of(1) } })),
    ).toThrow('"fed" in implementation.streams is not a subscription of the contract');
    expect(() => implementContract(g, contract, bad({ methods, topics: { rooms: {} } }))).toThrow(
      '"rooms" in implementation.topics is not a subscription of the contract',
    );
    expect(() => implementContract(g, contract, bad({ methods, streams: { feed: 1 } }))).toThrow(
      new TypeError('implementation.streams["feed"] must be a function, not 1'),
    );
    expect(() =>
      implementContract(
        g,
        contract,
        bad({ methods, streams: { feed: () => of(1) }, topics: { feed: {} } }),
      ),
    ).toThrow('"feed" has a stream and topic options: a name is a stream or a topic');
    // Nothing was registered by the refused calls.
    expect(g.registry.has('ping')).toBe(false);
    expect(g.pubsub.topicPattern('feed')).toBeUndefined();
    expect(g.pubsub.topicPattern('room.lobby')).toBeUndefined();
  });

  it('refuses, before registering anything, what gateway.method or gateway.topic would refuse', () => {
    const g = gateway();
    g.method('ping', () => 'mine');
    const methods = { 'cart.add': () => 1, ping: () => 2 };
    expect(() => implementContract(g, contract, { methods })).toThrow(
      'Method "ping" is already registered',
    );
    expect(g.registry.has('cart.add')).toBe(false);
    const starred = defineContract({
      name: 'bad',
      version: '1.0.0',
      methods: { go: {} },
      subscriptions: { 'a*b': { data: z.number() } },
    });
    expect(() => implementContract(g, starred, { methods: { go: () => 1 } })).toThrow(RangeError);
    expect(g.registry.has('go')).toBe(false);
  });

  it('refuses a subscription name declared before, or a latestValue of the wrong type, registering nothing; a corrected retry works', () => {
    const g = gateway();
    g.topic('feed');
    const methods = { 'cart.add': () => 1, ping: () => 2 };
    expect(() => implementContract(g, contract, { methods })).toThrow(
      'Topic "feed" is already declared',
    );
    expect(g.registry.has('cart.add')).toBe(false);
    expect(g.pubsub.topicPattern('room.lobby')).toBeUndefined();
    const h = gateway();
    h.stream('feed', () => of(1));
    expect(() => implementContract(h, contract, { methods })).toThrow(
      'Topic "feed" is already declared as a stream',
    );
    expect(h.registry.has('ping')).toBe(false);
    const k = gateway();
    expect(() =>
      implementContract(
        k,
        contract,
        bad({ methods, topics: { 'room.*': { latestValue: 'yes' } } }),
      ),
    ).toThrow(new TypeError('topic "room.*": latestValue must be true or false, not "yes"'));
    expect(k.registry.has('ping')).toBe(false);
    implementContract(k, contract, { methods, topics: { 'room.*': { latestValue: true } } });
    expect(k.registry.has('ping')).toBe(true);
  });

  it('still serves a well-formed implementation', () => {
    const g = gateway();
    const methods = { 'cart.add': () => 1, ping: () => 2 };
    implementContract(g, contract, { methods, streams: { feed: () => of(1) } });
    expect(g.registry.has('cart.add')).toBe(true);
    expect(g.pubsub.topicPattern('room.lobby')).toBe('room.*');
  });
});
