import { expect } from 'vitest';
import type { RawRpc, SubscriptionParams } from './raw-rpc.js';

/*
 * What the slow-consumer tests (test/pubsub/slow-consumer.test.ts, and the same with
 * permessage-deflate in test/deflate/deflate-slow-consumer.test.ts) check of the messages each
 * subscriber got. A message's result is `{ i }` with i its seq.
 */

/** Every message's seq follows the previous one's by exactly 1 + its `missed`. */
export function expectConsistentGaps(messages: SubscriptionParams[]): void {
  let previous = 0;
  for (const m of messages) {
    expect(m.seq).toBeGreaterThan(previous);
    expect(m.seq! - previous - 1, `gap before seq ${m.seq}`).toBe(m.missed ?? 0);
    expect((m.result as { i: number }).i).toBe(m.seq);
    previous = m.seq!;
  }
}

/** The subscriber that kept reading got each of the `published` messages, in order, none missed. */
export function expectHealthyGotEverything(
  healthy: RawRpc,
  healthyId: string,
  published: number,
): void {
  const messages = healthy.notifications(healthyId);
  expect(messages).toHaveLength(published);
  messages.forEach((m, k) => {
    expect(m.seq).toBe(k + 1);
    expect(m.missed).toBeUndefined();
    expect((m.result as { i: number }).i).toBe(k + 1);
  });
}
