/*
 * A per-subscriber stream that outruns its socket under the default 'drop' policy ends with a
 * frame that counts the messages skipped just before it (`"missed":N` beside `"complete":true`).
 * The client tells them as a gap signal of that count before the completion: every message is
 * either received or counted. Real gateway, default limits.
 */
import { range, map } from 'rxjs';
import { afterEach, expect, it } from 'vitest';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const ROWS = 3_000;

/** What a client's subscribeWithMeta('rows') gave, once the stream completed. */
async function everyEvent(url: string): Promise<SubscriptionEvent<{ i: number }>[]> {
  const client = res.client(url);
  await client.opened();
  const events: SubscriptionEvent<{ i: number }>[] = [];
  let completed = false;
  client.subscribeWithMeta<{ i: number }>('rows').subscribe({
    next: (e) => events.push(e),
    complete: () => (completed = true),
  });
  await waitUntil(() => completed, 'the end of the stream');
  return events;
}
const row = 'r'.repeat(4_096);

it('a stream past its socket: what was received plus the gap told before completion is every row', async () => {
  const { gateway, url } = await res.gateway();
  // All at once: 12 MiB in one turn, past the 1 MiB high-water mark.
  gateway.stream('rows', () => range(0, ROWS).pipe(map((i) => ({ i, row }))));
  const events = await everyEvent(url);
  const received = events.filter((e) => e.gap === undefined);
  const skippedBefore = received.reduce((n, e) => n + (e.missed ?? 0), 0);
  const gaps = events.filter((e) => e.gap !== undefined);
  const skippedAtEnd = gaps.reduce((n, e) => n + (e.gap ?? 0), 0);
  // Something was skipped (else this test proves nothing), and all of it was counted.
  expect(skippedBefore + skippedAtEnd).toBeGreaterThan(0);
  expect(received.length + skippedBefore + skippedAtEnd).toBe(ROWS);
  // Received in order, the last gap (if any) right before the completion.
  const order = received.map((e) => e.data.i);
  expect(order).toEqual([...order].sort((a, b) => a - b));
  if (gaps.length > 0) expect(events.at(-1)!.gap).toBeGreaterThan(0);
});

it('an async generator is pulled at its subscriber’s pace: every row arrives, none skipped', async () => {
  const { gateway, url } = await res.gateway();
  gateway.stream('rows', async function* () {
    // Nothing in it waits but a resolved promise: without being paced it would outrun the
    // socket as the Observable does.
    for (let i = 0; i < ROWS; i++) yield await Promise.resolve({ i, row });
  });
  const events = await everyEvent(url);
  expect(events.filter((e) => e.gap !== undefined || e.missed)).toEqual([]);
  expect(events.map((e) => e.data.i)).toEqual(Array.from({ length: ROWS }, (_, i) => i));
  expect(gateway.pubsub.stats.dropped).toBe(0);
});
