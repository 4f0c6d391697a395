import { expect } from 'vitest';
import type { RawRpc, SubscriptionParams } from './raw-rpc.js';

/*
 * What the slow-consumer tests (test/pubsub/slow-consumer.test.ts, and the same with
 * permessage-deflate in test/deflate/deflate-slow-consumer.test.ts) check of the messages each
 * subscriber got. A message's result is `{ i }` with i its seq.
 */

/**
 * Every message's seq follows the previous one's by exactly 1 + its `missed`, after the counts of
 * the gap signals between them (messages skipped that no message after them told) and past the
 * position frames (a position-tracking subscriber told where its numbering stands).
 */
export function expectConsistentGaps(messages: SubscriptionParams[]): void {
  let previous = 0;
  for (const m of messages) {
    if (m.gap !== undefined) {
      expect(m.gap, 'a counted gap signal').toBeGreaterThan(0);
      previous += m.gap!;
      continue;
    }
    if (m.result === undefined) {
      if (m.seq !== undefined) previous = m.seq;
      continue;
    }
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

/** Messages received (with a result) and those told lost (`missed` on them, gap signals). */
export function countedMessages(messages: SubscriptionParams[]): { got: number; lost: number } {
  let got = 0;
  let lost = 0;
  for (const m of messages) {
    if (m.result !== undefined) got++;
    lost += (m.missed ?? 0) + (m.gap ?? 0);
  }
  return { got, lost };
}
