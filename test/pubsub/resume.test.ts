import { afterEach, describe, expect, it } from 'vitest';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('gap-free resume', () => {
  it('on the wire: reply, then history after `since`, then live, each seq once and in order', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    for (let n = 1; n <= 5; n++) await gateway.publish('feed', n);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);

    const reply = await raw.request('subscribe', ['feed', null, { since: 2 }]);
    const id = reply.result as string;
    await gateway.publish('feed', 6);
    await raw.until(() => raw.notifications(id).length === 5, 'history and the live message');

    // A client that resumes without an epoch is told the topic's first (no seq, no result).
    const [notice, ...messages] = raw.notifications(id);
    expect(notice).toEqual({ subscription: id, epoch: expect.any(String) });
    expect(messages.map((m) => [m.seq, m.result])).toEqual([
      [3, 3],
      [4, 4],
      [5, 5],
      [6, 6],
    ]);
    const replyIndex = raw.frames.findIndex((f) => (f as { id?: unknown }).id === reply.id);
    const firstMessage = raw.frames.findIndex(
      (f) => (f as { method?: string }).method === 'subscription',
    );
    expect(replyIndex).toBeLessThan(firstMessage);
  });

  it('signals the gap when history no longer reaches back, then sends what is retained', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('short', { history: { maxLength: 3 } });
    for (let n = 1; n <= 10; n++) await gateway.publish('short', n);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);

    const id = (await raw.request('subscribe', { topic: 'short', since: 2 })).result as string;
    await raw.until(() => raw.notifications(id).length === 4, 'the gap and the retained messages');

    const [gap, ...rest] = raw.notifications(id);
    // Wanted 3..10; history holds 8..10: 5 messages (3..7) are lost, and the client is told.
    expect(gap).toMatchObject({ subscription: id, gap: 5 });
    expect(rest.map((m) => m.seq)).toEqual([8, 9, 10]);
  });

  it('a gateway restarted on a new memory broker: a resume with the old epoch gets a gap signal and the new numbering from its start', async () => {
    // The client saw old 1..3 on the first gateway process.
    const first = await res.gateway();
    first.gateway.topic('feed');
    const before = await RawRpc.open(first.url);
    res.track(before.socket);
    const oldId = (await before.request('subscribe', ['feed', null, { position: true }]))
      .result as string;
    await before.barrier();
    for (let n = 1; n <= 3; n++) await first.gateway.publish('feed', `old${n}`);
    await before.until(() => before.notifications(oldId).length === 5, 'position and old1..3');
    // Nothing was published when it subscribed: its position has no epoch yet, and it is told
    // the epoch just before the first message.
    const [position, notice, ...old] = before.notifications(oldId);
    expect(position).toEqual({ subscription: oldId, seq: 0 });
    expect(notice).toEqual({ subscription: oldId, epoch: expect.any(String) });
    expect(old.map((m) => m.result)).toEqual(['old1', 'old2', 'old3']);
    const oldEpoch = notice!.epoch;
    await before.close();
    await first.gateway.close();

    // A new process (a new memory broker) numbers the topic from 1 again.
    const second = await res.gateway();
    second.gateway.topic('feed');
    for (let n = 1; n <= 7; n++) await second.gateway.publish('feed', `new${n}`);
    const after = await RawRpc.open(second.url);
    res.track(after.socket);
    const id = (await after.request('subscribe', ['feed', null, { since: 3, epoch: oldEpoch }]))
      .result as string;
    await second.gateway.publish('feed', 'new8');
    await after.until(() => after.notifications(id).some((m) => m.seq === 8), 'the live new8');

    const [gap, ...rest] = after.notifications(id);
    expect(gap).toEqual({ subscription: id, gap: null, epoch: expect.any(String) });
    expect(gap!.epoch).not.toBe(oldEpoch);
    expect(rest.map((m) => [m.seq, m.result])).toEqual(
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => [n, `new${n}`]),
    );
  });

  it("a since past the topic's last seq (the broker lost the topic): gap signal of unknown size, then all of history", async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    for (let n = 1; n <= 2; n++) await gateway.publish('feed', n);
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['feed', null, { since: 5 }])).result as string;
    await gateway.publish('feed', 3);
    await raw.until(() => raw.notifications(id).some((m) => m.seq === 3), 'the live message');
    const [gap, ...rest] = raw.notifications(id);
    expect(gap).toEqual({ subscription: id, gap: null, epoch: expect.any(String) });
    expect(rest.map((m) => [m.seq, m.result])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it('rejects a malformed since with -32602', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const reply = await raw.request('subscribe', ['feed', null, { since: -1 }]);
    expect(reply.error).toMatchObject({ code: -32602 });
  });

  it('the client resumes by itself after a reconnect: no loss, no duplicate', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    const client = res.client(url);
    const events: SubscriptionEvent<number>[] = [];
    const sub = client.subscribeWithMeta<number>('feed').subscribe((e) => events.push(e));
    await waitUntil(() => gateway.pubsub.topics()['feed'] === 1, 'the subscription');
    for (let n = 1; n <= 3; n++) await gateway.publish('feed', n);
    await waitUntil(() => events.length === 3, 'the first three');

    // Drop the connection, and publish while the client is away.
    for (const session of gateway.sessions.values()) session.close(4001, 'test drop');
    for (let n = 4; n <= 6; n++) await gateway.publish('feed', n);
    await waitUntil(
      () => gateway.pubsub.topics()['feed'] === 1 && events.length >= 6,
      'the resume',
    );
    await gateway.publish('feed', 7);
    await waitUntil(() => events.length === 7, 'the live message after the resume');

    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(events.map((e) => e.data)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(events.some((e) => e.gap !== undefined)).toBe(false);
    sub.unsubscribe();
  });

  it('tells the client of a gap after a reconnect past the history limit', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('short', { history: { maxLength: 2 } });
    const client = res.client(url);
    const events: SubscriptionEvent<number>[] = [];
    const sub = client.subscribeWithMeta<number>('short').subscribe((e) => events.push(e));
    await waitUntil(() => gateway.pubsub.topics()['short'] === 1, 'the subscription');
    await gateway.publish('short', 1);
    await waitUntil(() => events.length === 1, 'the first message');

    for (const session of gateway.sessions.values()) session.close(4001, 'test drop');
    for (let n = 2; n <= 8; n++) await gateway.publish('short', n);
    await waitUntil(() => events.length === 4, 'the gap and the retained messages');

    // Missed 2..8; history kept 7 and 8: a gap of 5, then 7 and 8.
    expect(events[1]).toEqual({ data: undefined, gap: 5 });
    expect(events.slice(2).map((e) => e.seq)).toEqual([7, 8]);
    sub.unsubscribe();
  });
});
