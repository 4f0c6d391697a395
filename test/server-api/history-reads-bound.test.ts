/**
 * The server API's `history` reads go through the node's history reads, so
 * `limits.maxHistoryReads` bounds them as it bounds a client's `history` calls and resume
 * replays: one batch POST of 20 `history` calls on distinct topics, with maxHistoryReads 2,
 * has at most 2 broker reads under way at once, and every call is answered.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { History } from '../../src/pubsub/broker.js';
import { API_KEY, ApiResources } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

class CountingBroker extends MemoryBroker {
  running = 0;
  peak = 0;
  override async history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    this.running++;
    this.peak = Math.max(this.peak, this.running);
    try {
      await new Promise((r) => setTimeout(r, 200));
      return await super.history(topic, afterSeq, limit);
    } finally {
      this.running--;
    }
  }
}

it('server API history reads stay within limits.maxHistoryReads', async () => {
  const broker = new CountingBroker();
  const { gateway } = await res.gateway({ broker, limits: { maxHistoryReads: 2 } });
  gateway.topic('t.*', { history: { maxLength: 10 } });
  const api = await res.api(gateway);
  const batch = Array.from({ length: 20 }, (_, i) => ({
    jsonrpc: '2.0',
    id: i,
    method: 'history',
    params: { topic: `t.${i}` },
  }));
  const response = await fetch(api.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify(batch),
  });
  const replies = (await response.json()) as { result?: unknown; error?: unknown }[];
  expect(replies).toHaveLength(20);
  expect(replies.every((reply) => reply.result !== undefined)).toBe(true);
  expect(broker.peak).toBeLessThanOrEqual(2);
});
