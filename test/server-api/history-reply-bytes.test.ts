/**
 * A server API `history` page is bounded in bytes, not only in messages: `maxHistoryLimit`
 * (1 000, up to 100 000) messages of up to a MiB each would make one reply, and what the gateway
 * reads to write it, a GiB. The page ends before the message that would take its messages past
 * `serverApi.maxHistoryBytes` (at least one message, so a caller always moves on), `more` says
 * to ask on from its last seq, and the broker is read in pages of at most
 * HISTORY_READ_PAGE messages meanwhile.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { History } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { HISTORY_READ_PAGE } from '../../src/server-api/methods.js';
import { ApiResources, call } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

/** A MemoryBroker that notes the largest page a history read asked of it. */
class PageBroker extends MemoryBroker {
  largestAsked = 0;
  override history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    this.largestAsked = Math.max(this.largestAsked, limit ?? Infinity);
    return super.history(topic, afterSeq, limit);
  }
}

interface Page {
  messages: { seq: number; data: string }[];
  lastSeq: number;
  more: boolean;
}

/** A string whose publish payload (its JSON, quotes included) is `bytes` long. */
const ofBytes = (bytes: number): string => 'x'.repeat(bytes - 2);

async function started(settings: Record<string, unknown> = {}) {
  const broker = new PageBroker();
  const { gateway } = await res.gateway({ broker });
  const api = await res.api(gateway, settings);
  return { broker, gateway, api };
}

describe('server API history pages, in bytes', () => {
  it('by default a page ends within 4 MiB of messages; more says where to ask on; every message read in turn', async () => {
    const { broker, gateway, api } = await started();
    for (let i = 0; i < 10; i++) await gateway.publish('big', ofBytes(1_000_000));
    const seqs: number[] = [];
    const sizes: number[] = [];
    let since = 0;
    for (;;) {
      const page = await call<Page>(api.url, 'history', { topic: 'big', since });
      sizes.push(page.messages.length);
      seqs.push(...page.messages.map((m) => m.seq));
      if (!page.more) break;
      since = page.messages.at(-1)!.seq;
    }
    // 4 × 1 000 000 bytes fit in 4 MiB (4 194 304), a fifth would not.
    expect(sizes).toEqual([4, 4, 2]);
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(broker.largestAsked).toBeLessThanOrEqual(HISTORY_READ_PAGE);
  });

  it('a message larger than maxHistoryBytes is a page of its own', async () => {
    const { gateway, api } = await started({ maxHistoryBytes: 1_024 });
    for (let i = 0; i < 3; i++) await gateway.publish('big', ofBytes(2_000));
    const first = await call<Page>(api.url, 'history', { topic: 'big' });
    expect(first.messages.map((m) => m.seq)).toEqual([1]);
    expect(first.more).toBe(true);
    const last = await call<Page>(api.url, 'history', { topic: 'big', since: 2 });
    expect(last.messages.map((m) => m.seq)).toEqual([3]);
    expect(last.more).toBe(false);
  });

  it('small messages: limit still bounds the page, read in pages of HISTORY_READ_PAGE', async () => {
    const { broker, gateway, api } = await started();
    for (let i = 0; i < 250; i++) await gateway.publish('big', i);
    const page = await call<Page>(api.url, 'history', { topic: 'big', limit: 240 });
    expect(page.messages).toHaveLength(240);
    expect(page.messages.at(-1)!.seq).toBe(240);
    expect(page.more).toBe(true);
    expect(broker.largestAsked).toBeLessThanOrEqual(HISTORY_READ_PAGE);
    const all = await call<Page>(api.url, 'history', { topic: 'big' });
    expect(all.messages).toHaveLength(250);
    expect(all.more).toBe(false);
  });
});
