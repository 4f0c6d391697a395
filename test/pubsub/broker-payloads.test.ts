/**
 * A topic message read from the broker whose payload cannot go into a frame (not JSON, a line
 * break, nested past MAX_ENCODED_DEPTH), as something other than a gateway may write one: it
 * reaches no subscriber, live or replayed, and each is told of it as of a message lost (a
 * position-tracking subscriber by a gap signal, another by `missed`); `topic.history` leaves it
 * out and answers the rest. The memory broker, which only this process publishes to, is trusted
 * and not checked again.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());
const raw = (url: string) => res.rawRpc(url);

/** The memory broker standing in for one other processes write to (Redis, NATS): not trusted. */
class SharedBroker extends MemoryBroker {
  override readonly trustedPayloads = false;
}

const UNSENDABLE = ['not json {', '{"a":\n1}', '[1,\r2]', '['.repeat(600) + ']'.repeat(600)];

it('is offered to no subscriber; each is told of it; history leaves it out', async () => {
  const broker = new SharedBroker();
  const { gateway, url } = await res.gateway({ broker });
  gateway.topic('feed', { history: { maxLength: 100 } });
  const tracking = await raw(url);
  const tracked = (await tracking.request('subscribe', ['feed', null, { position: true }]))
    .result as string;
  const plain = await raw(url);
  const id = (await plain.request('subscribe', ['feed'])).result as string;
  await broker.publish('feed', '{"ok":1}');
  for (const payload of UNSENDABLE) await broker.publish('feed', payload);
  await broker.publish('feed', '{"ok":6}');
  await tracking.until(() => tracking.notifications(tracked).length === 5, 'five frames');
  const epoch = expect.any(String) as string;
  expect(tracking.notifications(tracked)).toEqual([
    { subscription: tracked, seq: 0 },
    { subscription: tracked, epoch },
    { subscription: tracked, seq: 1, result: { ok: 1 } },
    { subscription: tracked, gap: 4, epoch },
    { subscription: tracked, seq: 6, result: { ok: 6 } },
  ]);
  await plain.until(() => plain.notifications(id).length === 2, 'two messages');
  expect(plain.notifications(id)).toEqual([
    { subscription: id, seq: 1, result: { ok: 1 } },
    { subscription: id, seq: 6, missed: 4, result: { ok: 6 } },
  ]);
  const history = await plain.request('topic.history', { topic: 'feed', last: 10 });
  expect(history.result).toMatchObject({
    messages: [
      { seq: 1, data: { ok: 1 } },
      { seq: 6, data: { ok: 6 } },
    ],
    lastSeq: 6,
  });
  // Replayed from the start: the same.
  const resumed = await raw(url);
  const again = (await resumed.request('subscribe', { topic: 'feed', since: 0 })).result as string;
  await resumed.until(() => resumed.notifications(again).length >= 3, 'the replay');
  expect(resumed.notifications(again).filter((n) => 'result' in n || 'gap' in n)).toEqual([
    { subscription: again, seq: 1, result: { ok: 1 } },
    { subscription: again, gap: 4, epoch: expect.any(String) as string },
    { subscription: again, seq: 6, result: { ok: 6 } },
  ]);
});

it('topic.history pages on past a page of nothing but such messages', async () => {
  const broker = new SharedBroker();
  const { gateway, url } = await res.gateway({ broker });
  gateway.topic('feed', { history: { maxLength: 100 } });
  const client = await raw(url);
  await broker.publish('feed', '{"ok":1}');
  for (const payload of UNSENDABLE) await broker.publish('feed', payload);
  await broker.publish('feed', '{"ok":6}');
  // Paged one at a time, each page asked from the last seq of the one before.
  const seen: number[] = [];
  let since = 0;
  for (;;) {
    const reply = await client.request('topic.history', { topic: 'feed', since, limit: 1 });
    const { messages, lastSeq } = reply.result as { messages: { seq: number }[]; lastSeq: number };
    if (messages.length === 0) break;
    seen.push(...messages.map((m) => m.seq));
    since = messages.at(-1)!.seq;
    if (since >= lastSeq) break;
  }
  expect(seen).toEqual([1, 6]);
});
