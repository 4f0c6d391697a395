/*
 * subscriptionStatus$ through a lost network path: a TCP relay between the client and the
 * gateway is cut (the client sees the socket die, not a close from the server), the topic moves
 * on while the client is away, and the relay comes back. The status goes resuming for as long as
 * the client is away, then subscribed; a resume past the topic's history reports the gap, with
 * how many messages history no longer held, then subscribed again.
 */
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import type { SubscriptionStatus } from '../../src/client/subscription-status.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { Resources } from '../support/resources.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitForState } from '../support/client.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
const relays: TcpRelay[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  for (const relay of relays.splice(0)) await relay.cut();
  await res.cleanup();
});

async function relayedGateway(history: number) {
  const { gateway, port } = await res.gateway();
  gateway.topic('feed', { history: { maxLength: history } });
  const relay = new TcpRelay(port);
  relays.push(relay);
  await relay.start();
  const client = res.client(`ws://127.0.0.1:${relay.port}/rpc`);
  const statuses: SubscriptionStatus[] = [];
  const events: SubscriptionEvent<number>[] = [];
  subscriptions.push(
    subscriptionStatus$(client, 'feed').subscribe((s) => statuses.push(s)),
    client.subscribeWithMeta<number>('feed').subscribe((e) => events.push(e)),
  );
  await waitUntil(() => statuses.at(-1)?.state === 'subscribed', 'the subscription');
  await waitUntil(() => gateway.pubsub.topics()['feed'] === 1, 'the server side');
  return { gateway, relay, client, statuses, events };
}

describe('subscriptionStatus$ when the network path is lost', () => {
  it('resuming while the relay is cut, subscribed once resubscribed, nothing missed within history', async () => {
    const { gateway, relay, client, statuses, events } = await relayedGateway(100);
    await gateway.publish('feed', 1);
    await waitUntil(() => events.length === 1, 'the first message');

    let endings = 0;
    subscriptions.push(client.disconnects$.subscribe(() => endings++));
    await relay.cut();
    await waitForState(client, 'reconnecting');
    expect(statuses.at(-1)).toEqual({ state: 'resuming', seq: 1 });
    for (let n = 2; n <= 4; n++) await gateway.publish('feed', n);
    // Still away: still resuming, however many attempts fail.
    await waitUntil(() => endings >= 3, 'the loss and two failed attempts');
    expect(statuses.at(-1)!.state).toBe('resuming');

    await relay.restore();
    await waitUntil(() => events.length === 4, 'the replay');
    expect(statuses.map((s) => s.state)).toEqual([
      'closed',
      'connecting',
      'subscribed',
      'resuming',
      'subscribed',
    ]);
    expect(events.map((e) => e.data)).toEqual([1, 2, 3, 4]);
  });

  it('a resume past the history is gap (with the count history no longer held), then subscribed', async () => {
    const { gateway, relay, client, statuses, events } = await relayedGateway(2);
    await gateway.publish('feed', 1);
    await waitUntil(() => events.length === 1, 'the first message');

    await relay.cut();
    await waitForState(client, 'reconnecting');
    // Missed 2..8 while away; history keeps 7 and 8.
    for (let n = 2; n <= 8; n++) await gateway.publish('feed', n);
    await relay.restore();
    await waitUntil(() => events.length === 4, 'the gap signal and the retained messages');

    expect(events[1]).toEqual({ data: undefined, gap: 5 });
    expect(statuses.slice(2)).toEqual([
      { state: 'subscribed' },
      { state: 'resuming', seq: 1 },
      { state: 'subscribed', seq: 1 },
      // seq: where the subscription resumes from, past the lost ones.
      { state: 'gap', missed: 5, seq: 6 },
      { state: 'subscribed', seq: 6 },
    ]);
    await gateway.publish('feed', 9);
    await waitUntil(() => events.length === 5, 'a live message');
    expect(statuses).toHaveLength(7);
  });
});
