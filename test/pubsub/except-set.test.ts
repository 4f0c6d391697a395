/**
 * `except` as fan-out applies it: the matcher gives the answer `includes` gives, for short lists
 * (searched) and long ones (a Set), and a TopicRegistry passes by exactly the excepted sessions'
 * subscriptions among many.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_EXCEPT } from '../../src/pubsub/broker.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import type { Delivery } from '../../src/pubsub/delivery.js';
import { exceptMatcher } from '../../src/pubsub/except-set.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { TopicRegistry } from '../../src/pubsub/topic-registry.js';

describe('exceptMatcher', () => {
  it('answers as except.includes(id) does, whatever the list', () => {
    const id = fc.string({ maxLength: 4 });
    fc.assert(
      fc.property(fc.array(id, { maxLength: MAX_EXCEPT }), fc.array(id), (except, asked) => {
        const excepted = exceptMatcher(except);
        for (const candidate of [...asked, ...except]) {
          expect(excepted(candidate)).toBe(except.includes(candidate));
        }
      }),
      { numRuns: 500 },
    );
  });
});

/** A delivery that only records what it was given. */
function recorder(ownerId: string | undefined, log: Map<string | undefined, string[]>) {
  const record = (what: string) => log.set(ownerId, [...(log.get(ownerId) ?? []), what]);
  return {
    ownerId,
    pass: (seq: number) => record(`pass ${seq}`),
    offer: (_tail: string, _shared: unknown, seq: number) => record(`offer ${seq}`),
    epochSeen: () => undefined,
  } as unknown as Delivery;
}

describe('fan-out with except', () => {
  it(`passes by the subscriptions of the ${MAX_EXCEPT} excepted sessions among 200, and only theirs`, async () => {
    let deliver: ((message: BrokerMessage) => void) | undefined;
    const broker = new MemoryBroker();
    const subscribe = broker.subscribe.bind(broker);
    broker.subscribe = (topic, onMessage) => {
      deliver = onMessage;
      return subscribe(topic, onMessage);
    };
    const registry = new TopicRegistry(
      broker,
      'head',
      () => 'id',
      () => undefined,
    );
    await registry.hold('news');
    const log = new Map<string | undefined, string[]>();
    const owners = [...Array.from({ length: 200 }, (_, i) => `s${i}`), undefined];
    for (const owner of owners) registry.attach('news', recorder(owner, log));
    const except = Array.from({ length: MAX_EXCEPT }, (_, i) => `s${i * 3}`);
    deliver!({ topic: 'news', seq: 1, payload: '1', except });
    for (const owner of owners) {
      const excepted = owner !== undefined && except.includes(owner);
      expect(log.get(owner)).toEqual([excepted ? 'pass 1' : 'offer 1']);
    }
    registry.release('news');
    await broker.close();
  });
});
