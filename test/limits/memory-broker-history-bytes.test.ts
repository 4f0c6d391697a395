// The MemoryBroker keeps history in the gateway's own heap, so what it keeps is bounded in bytes
// as well as by count and age: a topic's log by `maxTopicHistoryChars`, every log together by
// `maxHistoryChars` (the least recently published topics give up their oldest messages first),
// and the idle logs by `maxIdleTopics` however many `$`-topics (user and node inboxes, which keep
// no log) are subscribed. A broadcast of large messages to many topics, or large messages to one,
// cannot grow the heap past them.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_HISTORY_CHARS,
  DEFAULT_MAX_TOPIC_HISTORY_CHARS,
  MemoryBroker,
} from '../../src/pubsub/memory-broker.js';

const KEEP = { maxLength: 1_000, maxAgeMs: 3_600_000 };
const payload = (chars: number, tag: string): string => JSON.stringify(tag.padEnd(chars - 2, '.'));

async function keptChars(broker: MemoryBroker, topics: string[]): Promise<number> {
  let chars = 0;
  for (const topic of topics) {
    for (const m of (await broker.history(topic, 0)).messages) chars += m.payload.length;
  }
  return chars;
}

describe('MemoryBroker history, in characters', () => {
  it('defaults: 64 Mi characters a topic, 256 Mi in all', () => {
    expect(DEFAULT_MAX_TOPIC_HISTORY_CHARS).toBe(64 * 1024 * 1024);
    expect(DEFAULT_MAX_HISTORY_CHARS).toBe(256 * 1024 * 1024);
  });

  it("a topic's log keeps its newest messages within maxTopicHistoryChars", async () => {
    const broker = new MemoryBroker({ maxTopicHistoryChars: 10_000 });
    for (let n = 1; n <= 20; n++) await broker.publish('t', payload(1_000, String(n)), KEEP);
    const history = await broker.history('t', 0);
    expect(history.lastSeq).toBe(20);
    expect(history.messages.map((m) => m.seq)).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
    expect(broker.retainedHistoryChars).toBe(10_000);
  });

  it('a message larger than maxTopicHistoryChars is kept alone, as the latest', async () => {
    const broker = new MemoryBroker({ maxTopicHistoryChars: 1_000 });
    await broker.publish('t', payload(500, 'a'), KEEP);
    await broker.publish('t', payload(5_000, 'b'), KEEP);
    expect((await broker.history('t', 0)).messages.map((m) => m.seq)).toEqual([2]);
  });

  it('all logs together stay within maxHistoryChars: the least recently published give up their oldest first', async () => {
    const broker = new MemoryBroker({ maxHistoryChars: 50_000 });
    const topics = Array.from({ length: 100 }, (_, i) => `room.${i}`);
    await broker.subscribe('room.0', () => undefined);
    // A broadcast: one message of 1 000 characters to each of 100 topics, twice.
    for (const round of ['a', 'b']) {
      for (const topic of topics) await broker.publish(topic, payload(1_000, round), KEEP);
    }
    expect(broker.retainedHistoryChars).toBeLessThanOrEqual(50_000);
    expect(await keptChars(broker, topics)).toBe(broker.retainedHistoryChars);
    // The topic published last keeps its message. Its first one, the least recently published
    // of all by then, went before it: emptied and idle, its log was dropped (as a sweep drops
    // an expired one), so it numbers from 1 again in a new epoch. The earliest topics keep
    // none; a subscribed one keeps its numbering.
    const last = await broker.history('room.99', 0);
    expect(last.messages.map((m) => [m.seq, m.payload])).toEqual([[1, payload(1_000, 'b')]]);
    expect(await broker.history('room.0', 0)).toMatchObject({ messages: [], lastSeq: 2 });
    expect(await broker.publish('room.0', payload(10, 'c'), KEEP)).toBe(3);
  });

  it('subscribed $-topics do not widen maxIdleTopics', async () => {
    const broker = new MemoryBroker({ maxIdleTopics: 10 });
    for (let n = 0; n < 1_000; n++) await broker.subscribe(`$user.${n}`, () => undefined);
    for (let n = 0; n < 1_000; n++) await broker.publish(`room.${n}`, '"x"', KEEP);
    expect(broker.retainedTopics).toBeLessThanOrEqual(11);
  });
});
