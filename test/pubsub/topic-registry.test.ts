import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import type { Delivery } from '../../src/pubsub/delivery.js';
import { TopicRegistry } from '../../src/pubsub/topic-registry.js';

/** A real MemoryBroker whose subscribe completes only when the test says so (a slow broker). */
class GatedBroker extends MemoryBroker {
  subscribeCalls = 0;
  private opens: (() => void)[] = [];

  override async subscribe(
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    this.subscribeCalls++;
    await new Promise<void>((resolve) => this.opens.push(resolve));
    return super.subscribe(topic, deliver);
  }

  openAll(): void {
    for (const open of this.opens.splice(0)) open();
  }
}

describe('TopicRegistry.hold', () => {
  it('a second holder waits for the first holder’s broker subscription, and there is only one', async () => {
    const broker = new GatedBroker();
    let ids = 0;
    const registry = new TopicRegistry(
      broker,
      'head',
      () => `id${++ids}`,
      () => undefined,
    );
    const settled: string[] = [];
    const first = registry.hold('news').then(() => settled.push('first'));
    const second = registry.hold('news').then(() => settled.push('second'));
    await new Promise((resolve) => setImmediate(resolve));
    // Neither may be accepted before the broker has the topic.
    expect(settled).toEqual([]);
    expect(broker.subscribeCalls).toBe(1);
    broker.openAll();
    await Promise.all([first, second]);
    expect(settled).toEqual(['first', 'second']);
    registry.release('news');
    registry.release('news');
    expect(registry.topicCount).toBe(0);
    await broker.close();
  });

  it('a broker that throws synchronously leaves nothing held, and the next hold subscribes again', async () => {
    const broker = new MemoryBroker();
    let calls = 0;
    const subscribe = broker.subscribe.bind(broker);
    broker.subscribe = (topic, deliver) => {
      if (++calls === 1) throw new Error('not connected');
      return subscribe(topic, deliver);
    };
    const registry = new TopicRegistry(
      broker,
      'head',
      () => 'id',
      () => undefined,
    );
    await expect(registry.hold('t')).rejects.toThrow('not connected');
    expect(registry.topicCount).toBe(0);
    await registry.hold('t');
    expect(calls).toBe(2);
    expect(registry.topicCount).toBe(1);
    registry.release('t');
    await broker.close();
  });

  it('when the broker refuses, every waiting holder fails and the topic is not left held', async () => {
    const broker = new MemoryBroker();
    broker.subscribe = () => Promise.reject(new Error('broker down'));
    const registry = new TopicRegistry(
      broker,
      'head',
      () => 'id',
      () => undefined,
    );
    const results = await Promise.allSettled([registry.hold('t'), registry.hold('t')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(registry.topicCount).toBe(0);
    await broker.close();
  });
});

/**
 * A delivery that records what it is offered and, when offered a seq its plan names, does what
 * a slow consumer's close does on a broker that fans out at once: it leaves the topic and an
 * observer of the leave publishes to the same topic before the offer returns.
 */
function reacting(
  registry: TopicRegistry,
  broker: MemoryBroker,
  plan: Map<number, boolean>,
  got: number[],
  fired: { count: number },
) {
  const delivery = {
    ownerId: undefined,
    epochSeen: () => undefined,
    pass: (seq: number) => got.push(seq),
    offer: (_tail: string, _shared: unknown, seq: number) => {
      got.push(seq);
      const leaves = plan.get(seq);
      if (leaves === undefined) return;
      if (leaves) registry.detach('room', delivery);
      fired.count++;
      void broker.publish('room', JSON.stringify({ after: seq }));
    },
  } as unknown as Delivery;
  return delivery;
}

describe('a publish to the topic from inside its fan-out', () => {
  it('reaches every subscriber after the message being offered, each in order, none lost', async () => {
    const subscribers = 6;
    const reaction = fc.record({
      who: fc.nat({ max: subscribers - 1 }),
      at: fc.integer({ min: 1, max: 12 }),
      leaves: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(reaction, { maxLength: 6 }),
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(2, 100),
        async (reactions, published, perTurn) => {
          const broker = new MemoryBroker();
          const registry = new TopicRegistry(
            broker,
            'head',
            () => 'id',
            () => undefined,
            perTurn,
          );
          await registry.hold('room');
          const got = Array.from({ length: subscribers }, () => [] as number[]);
          const fired = { count: 0 };
          for (let i = 0; i < subscribers; i++) {
            const plan = new Map<number, boolean>();
            for (const { who, at, leaves } of reactions) if (who === i) plan.set(at, leaves);
            registry.attach('room', reacting(registry, broker, plan, got[i]!, fired));
          }
          for (let i = 0; i < published; i++) await broker.publish('room', JSON.stringify(i));
          // A fan-out in turns finishes over later turns.
          for (let turn = 0; turn < 20; turn++) await new Promise((r) => setImmediate(r));
          const last = published + fired.count;
          for (const seqs of got) {
            // Each got 1, 2, 3... with nothing skipped or repeated, up to where it left (if so).
            expect(seqs).toEqual(seqs.map((_, i) => i + 1));
          }
          // One that stayed got every message the topic had.
          const stayed = got.filter((_, i) => !reactions.some((r) => r.who === i && r.leaves));
          for (const seqs of stayed) expect(seqs.length).toBe(last);
          registry.release('room');
          await broker.close();
        },
      ),
      { numRuns: 300 },
    );
  });
});
