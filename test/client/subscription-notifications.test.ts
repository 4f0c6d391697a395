/*
 * A subscription's messages go from the frame straight to their subscription (the client's peer,
 * src/client/client.ts): not to the handlers the client registered nor to `notifications$`. A
 * notification of the subscription method that names no subscription is an ordinary one.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { IncomingNotification } from '../../src/peer/notifications.js';
import { Resources } from '../support/resources.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('subscription notifications', () => {
  it('reach their subscription only; one naming no subscription reaches notifications$ and handlers', async () => {
    const { url, gateway } = await res.gateway();
    gateway.topic('news');
    const before = sessionIds(gateway);
    const client = res.client(url);
    await client.opened();
    await waitUntil(() => gateway.sessions.size > before.size, 'the session to open');
    const session = newSession(gateway, before);

    const seen: IncomingNotification[] = [];
    client.notifications$.subscribe((n) => seen.push(n));
    const handled: unknown[] = [];
    client.method('subscription', (params) => {
      handled.push(params);
    });
    const data: unknown[] = [];
    client.subscribe('news').subscribe((d) => data.push(d));
    await waitUntil(() => (gateway.pubsub.topics()['news'] ?? 0) === 1, 'the subscription');

    await gateway.publish('news', { n: 1 });
    await waitUntil(() => data.length === 1, 'the message');
    session.notify('subscription', { plain: true });
    session.notify('other', { n: 2 });
    await waitUntil(() => seen.length === 2, 'the two notifications');

    expect(data).toEqual([{ n: 1 }]);
    expect(seen).toEqual([
      { method: 'subscription', params: { plain: true } },
      { method: 'other', params: { n: 2 } },
    ]);
    expect(handled).toEqual([{ plain: true }]);
  });
});
