import { describe, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';

describe('MemoryBroker', () => {
  it('numbers a topic 1..N and keeps history bounded by length', async () => {
    const broker = new MemoryBroker();
    for (let n = 1; n <= 5; n++) {
      expect(await broker.publish('t', String(n), { maxLength: 3, maxAgeMs: 60_000 })).toBe(n);
    }
    const history = await broker.history('t', 0);
    expect(history.lastSeq).toBe(5);
    expect(history.messages.map((m) => m.seq)).toEqual([3, 4, 5]);
  });

  it('drops history older than maxAgeMs', async () => {
    let now = 1_000;
    const broker = new MemoryBroker(() => now);
    await broker.publish('t', '1', { maxLength: 10, maxAgeMs: 100 });
    now += 150;
    await broker.publish('t', '2', { maxLength: 10, maxAgeMs: 100 });
    expect((await broker.history('t', 0)).messages.map((m) => m.payload)).toEqual(['2']);
  });

  it('delivers $-topics (addressed messages) without keeping any history for them', async () => {
    const broker = new MemoryBroker();
    const got: BrokerMessage[] = [];
    await broker.subscribe('$user.ann', (m) => got.push(m));
    await broker.publish('$user.ann', '"hi"');
    await broker.publish('$user.nobody', '"lost"');
    expect(got.map((m) => m.payload)).toEqual(['"hi"']);
    expect(await broker.history('$user.ann', 0)).toEqual({ messages: [], lastSeq: 0 });
    expect(await broker.history('$user.nobody', 0)).toEqual({ messages: [], lastSeq: 0 });
  });
});
