// The project's client and server-side joins: the joined subscription as an Observable
// (client.joined$), looked up by topic (client.subscriptionOf), ended by session.leave, and
// resumed after a dropped connection from the last message seen, with nothing lost.
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { JoinedSubscription, SubscriptionEvent } from '../../src/client/subscriptions.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { Resources } from '../support/resources.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const relays: TcpRelay[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const relay of relays.splice(0)) await relay.cut();
});

async function onlySession(gateway: Gateway): Promise<Session> {
  await waitUntil(() => gateway.sessions.size === 1, 'one session');
  return [...gateway.sessions.values()][0]!;
}

describe('joined subscriptions in the client', () => {
  it('arrive on joined$ as an Observable, are found by topic, and complete on leave', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('room.*');
    const client = res.client(url);
    const announced = firstValueFrom(client.joined$);
    await client.opened();
    const session = await onlySession(gateway);
    expect(client.subscriptionOf('room.1')).toBeUndefined();

    const events: SubscriptionEvent<unknown>[] = [];
    let completed = false;
    const joinedPromise = session.join('room.1');
    const joined: JoinedSubscription = await announced;
    expect(joined.topic).toBe('room.1');
    joined.subscription.subscribe({
      next: (e) => events.push(e),
      complete: () => (completed = true),
    });
    await joinedPromise;
    await gateway.publish('room.1', 'a');
    await waitUntil(() => events.length === 1, 'the first message');

    // Looked up by topic: the same subscription, another Observer, no new subscribe.
    const lookedUp: unknown[] = [];
    client.subscriptionOf('room.1')!.subscribe((e) => lookedUp.push(e.data));
    await gateway.publish('room.1', 'b');
    await waitUntil(() => events.length === 2 && lookedUp.length === 1, 'the second message');
    expect(events.map((e) => [e.seq, e.data])).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    expect(lookedUp).toEqual(['b']);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);

    expect(session.leave('room.1')).toBe(true);
    await waitUntil(() => completed, 'the completion');
    expect(client.subscriptionOf('room.1')).toBeUndefined();
  });

  it("finds the client's own subscription by topic too", async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const client = res.client(url);
    const got: unknown[] = [];
    const own = client.subscribe('news').subscribe((d) => got.push(d));
    await waitUntil(() => Object.keys(gateway.pubsub.topics()).length === 1, 'subscribed');
    const also: unknown[] = [];
    client.subscriptionOf('news')!.subscribe((e) => also.push(e.data));
    await gateway.publish('news', 1);
    await waitUntil(() => got.length === 1 && also.length === 1, 'the message');
    own.unsubscribe();
  });

  it('resumes a joined subscription after a dropped connection, from the last message seen', async () => {
    const { gateway, port } = await res.gateway();
    gateway.topic('room.*');
    const relay = new TcpRelay(port);
    relays.push(relay);
    const relayPort = await relay.start();
    const client = res.client(`ws://127.0.0.1:${relayPort}/rpc`);
    const data: unknown[] = [];
    client.joined$.subscribe(({ subscription }) =>
      subscription.subscribe((e) => data.push(e.data)),
    );
    await client.opened();
    const session = await onlySession(gateway);
    await session.join('room.1');
    for (const n of [1, 2]) await gateway.publish('room.1', n);
    await waitUntil(() => data.length === 2, 'two messages');

    await relay.cut();
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
    for (const n of [3, 4, 5]) await gateway.publish('room.1', n);
    await relay.restore();
    await client.opened();
    await waitUntil(() => data.length === 5, 'the missed messages');
    await gateway.publish('room.1', 6);
    await waitUntil(() => data.length === 6, 'the next live one');
    expect(data).toEqual([1, 2, 3, 4, 5, 6]);
    // On the new session the client subscribed it itself: leave still ends it.
    const next = await onlySession(gateway);
    expect(gateway.pubsub.subscriptionCount(next)).toBe(1);
    expect(next.leave('room.1')).toBe(true);
  });

  it('an application that joins on every connect: after a reconnect nothing published meanwhile is lost', async () => {
    const { gateway, port } = await res.gateway();
    gateway.topic('room.*');
    // The join of the new session reaches the client before its own resubscribe is answered.
    gateway.connected$.subscribe((session) => {
      session.join('room.1').catch(() => undefined);
    });
    const relay = new TcpRelay(port);
    relays.push(relay);
    const relayPort = await relay.start();
    const client = res.client(`ws://127.0.0.1:${relayPort}/rpc`);
    const events: SubscriptionEvent<unknown>[] = [];
    client.joined$.subscribe(({ subscription }) => subscription.subscribe((e) => events.push(e)));
    await client.opened();
    await onlySession(gateway);
    await waitUntil(() => client.subscriptionOf('room.1') !== undefined, 'joined');
    for (const n of [1, 2]) await gateway.publish('room.1', n);
    await waitUntil(() => events.length === 2, 'two messages');

    await relay.cut();
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
    for (const n of [3, 4, 5]) await gateway.publish('room.1', n);
    await relay.restore();
    await client.opened();
    await gateway.publish('room.1', 6);
    await waitUntil(() => events.some((e) => e.data === 6), 'the next live one');
    expect(events.map((e) => e.data)).toEqual([1, 2, 3, 4, 5, 6]);
    // One subscription is kept on the new session: the other was unsubscribed.
    const next = await onlySession(gateway);
    await waitUntil(() => gateway.pubsub.subscriptionCount(next) === 1, 'one subscription');
  });
});
