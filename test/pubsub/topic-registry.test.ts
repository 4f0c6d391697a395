import { describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
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
