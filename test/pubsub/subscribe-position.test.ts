/*
 * A subscribe with `{"position": true}` is answered once its position is known, the reply and
 * the position in one write: a client that has the reply has where it starts. What the wait
 * must not leave behind: a subscription whose call was cancelled or whose connection closed
 * meanwhile, and one the server ended meanwhile must still reach the client as ended.
 */
import type { Observable, Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { HeldPositionBroker } from '../support/held-position.js';
import { RawRpc } from '../support/raw-rpc.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { observeEvents } from '../support/client.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const observe = <T>(source: Observable<SubscriptionEvent<T>>) =>
  observeEvents(source, subscriptions);

async function rawWithSession<C>(gateway: Gateway<C>, url: string) {
  const before = sessionIds(gateway);
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return { client, session: newSession(gateway, before) };
}

/** Send a subscribe to `news` with `position: true`; resolves with its id once its position read is held. */
async function subscribeHeld(client: RawRpc, broker: HeldPositionBroker): Promise<number> {
  const id = client.nextId();
  client.send({
    jsonrpc: '2.0',
    method: 'subscribe',
    params: ['news', null, { position: true }],
    id,
  });
  await waitUntil(() => broker.held.length === 1, 'the position read');
  return id;
}

/**
 * Numbers each frame `client` reads by the synchronous run it arrived in: `ws` emits the
 * frames of one socket read one after another, with no microtask between them, so frames that
 * share a number came in one read.
 */
function readsOf(client: RawRpc): number[] {
  const reads: number[] = [];
  let read = 0;
  let counting = false;
  client.socket.on('message', () => {
    reads.push(read);
    if (counting) return;
    counting = true;
    queueMicrotask(() => {
      counting = false;
      read++;
    });
  });
  return reads;
}

describe('subscribing with its position', () => {
  it('the reply waits for the position, leaves in one write with it, and what was published meanwhile follows', async () => {
    const broker = new HeldPositionBroker();
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('news');
    await gateway.publish('news', 'before');
    const { client } = await rawWithSession(gateway, url);
    const reads = readsOf(client);

    const id = await subscribeHeld(client, broker);
    // Published while the position is read: not counted in it, so delivered after it.
    await gateway.publish('news', 'meanwhile');
    // A later request is answered, this one is not: its reply waits for the position.
    await client.barrier();
    expect(client.frames.some((f) => f.id === id)).toBe(false);

    broker.release();
    const reply = await client.response(id);
    const subscription = reply.result as string;
    await client.until(
      () => client.notifications(subscription).length === 2,
      'position and message',
    );
    expect(client.notifications(subscription)).toEqual([
      { subscription, seq: 1, epoch: expect.any(String) },
      { subscription, seq: 2, result: 'meanwhile' },
    ]);
    const replyAt = client.frames.indexOf(reply);
    const positionAt = client.frames.findIndex((f) => f.method === 'subscription');
    expect(positionAt).toBe(replyAt + 1);
    expect(reads[positionAt]).toBe(reads[replyAt]);
  });

  it('rpc.cancel while the position is read: -32001, and nothing left (no subscription, topic released)', async () => {
    const broker = new HeldPositionBroker();
    const { gateway, url } = await res.gateway({ broker, limits: { maxSubscriptions: 1 } });
    gateway.topic('news');
    const { client, session } = await rawWithSession(gateway, url);

    const id = await subscribeHeld(client, broker);
    client.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
    await client.barrier();
    broker.release();

    expect((await client.response(id)).error).toMatchObject({ code: ErrorCode.RequestCancelled });
    await client.barrier();
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    expect(gateway.pubsub.topics()).toEqual({});
    await gateway.publish('news', 'nobody');
    // The only slot is free again, and nothing of the cancelled one was written.
    broker.hold = false;
    expect(typeof (await client.request('subscribe', ['news'])).result).toBe('string');
    expect(client.notifications()).toEqual([]);
  });

  it('the connection closes while the position is read: nothing left', async () => {
    const broker = new HeldPositionBroker();
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('news');
    const { client } = await rawWithSession(gateway, url);

    await subscribeHeld(client, broker);
    await client.close();
    await waitUntil(() => gateway.sessions.size === 0, 'the session to close');
    broker.release();
    await gateway.publish('news', 'nobody');
    expect(gateway.pubsub.topics()).toEqual({});
  });

  it('a subscription the server ends while its position is read (session.leave): the client is answered its id and sees it end', async () => {
    const broker = new HeldPositionBroker();
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('news');
    const before = sessionIds(gateway);
    const client = res.client(url);
    await client.opened();
    const session = newSession(gateway, before);
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => broker.held.length === 1, 'the position read');

    expect(session.leave('news')).toBe(true);
    broker.release();
    await waitUntil(() => seen.done, 'the subscription to complete');
    expect(seen.events).toEqual([]);
    expect(seen.errors).toEqual([]);
    expect(gateway.pubsub.topics()).toEqual({});
  });
});
