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

  it('drops the log of a topic nobody subscribes to once its messages have expired', async () => {
    let now = 1_000;
    const broker = new MemoryBroker({ now: () => now, sweepIntervalMs: 1_000 });
    const short = { maxLength: 10, maxAgeMs: 500 };
    for (let n = 0; n < 5_000; n++) await broker.publish(`room.${n}`, '"x"', short);
    await broker.subscribe('kept', () => undefined);
    await broker.publish('kept', '"y"', short);
    expect(broker.retainedTopics).toBe(5_001);

    now += 2_000; // every message has expired, and a sweep is due
    await broker.publish('fresh', '"z"', short);
    // Only the subscribed topic (whose numbering must go on) and the new one are left.
    expect(broker.retainedTopics).toBe(2);
    expect(await broker.history('room.1', 0)).toEqual({ messages: [], lastSeq: 0 });
    expect(await broker.history('kept', 0)).toMatchObject({ messages: [], lastSeq: 1 });
    expect(await broker.publish('kept', '"again"', short)).toBe(2);
    await broker.close();
  });

  it('keeps at most maxIdleTopics idle logs, dropping the least recently published first', async () => {
    let now = 0;
    const broker = new MemoryBroker({ now: () => now, maxIdleTopics: 100 });
    const long = { maxLength: 10, maxAgeMs: 3_600_000 };
    await broker.subscribe('subscribed', () => undefined);
    await broker.publish('subscribed', '"s"', long);
    for (let n = 0; n < 1_000; n++) {
      now++;
      await broker.publish(`room.${n}`, `${n}`, long);
    }
    expect(broker.retainedTopics).toBeLessThanOrEqual(101);
    // The most recent ones keep their history; the subscribed one is never dropped.
    expect((await broker.history('room.999', 0)).messages.map((m) => m.payload)).toEqual(['999']);
    expect(await broker.history('subscribed', 0)).toMatchObject({ lastSeq: 1 });
    // A dropped topic published again numbers from 1 in a new epoch, so a position from before
    // is recognized as another numbering.
    const before = await broker.history('room.0', 0);
    expect(before).toEqual({ messages: [], lastSeq: 0 });
    expect(await broker.publish('room.0', '"again"', long)).toBe(1);
    const again = await broker.history('room.0', 0);
    expect(again.epoch).toBeDefined();
    expect(again.epoch).not.toBe((await broker.history('room.999', 0)).epoch);
    await broker.close();
  });

  it('names each numbering: a new broker (a restarted gateway) has other epochs', async () => {
    const first = new MemoryBroker();
    const second = new MemoryBroker();
    await first.publish('t', '1');
    await second.publish('t', '1');
    const a = await first.history('t', 0);
    const b = await second.history('t', 0);
    expect(a.epoch).toEqual(expect.any(String));
    expect(a.messages[0]!.epoch).toBe(a.epoch);
    expect(b.epoch).not.toBe(a.epoch);
    await first.close();
    await second.close();
  });
});
