import { firstValueFrom, take, toArray } from 'rxjs';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { Chat, ChatSend, Countdown, Ticker, startTicker } from '../../demo/pubsub.js';
import { registerDemoService } from '../../demo/service.js';
import type { ChatMessage } from '../../demo/pubsub.js';
import {
  ErrorCode,
  InvalidParamsError,
  JsonRpcError,
  type ClientOptions,
  type Gateway,
  type IncomingNotification,
  type SubscriptionEvent,
} from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { waitForState } from '../support/client.js';
import { RawRpc } from '../support/raw-rpc.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { recordingWebSocket } from '../support/client.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const topicsOf = (gateway: Gateway<unknown>) => gateway.pubsub.topics();

/** A client on `url` plus the gateway session it opened and the frames it sends. */
async function clientWithSession(
  gateway: Gateway<unknown>,
  url: string,
  options: Partial<ClientOptions> = {},
) {
  const sent: WireFrame[] = [];
  const before = sessionIds(gateway);
  const client = res.client(url, { WebSocket: recordingWebSocket(sent), ...options });
  await client.opened();
  await waitUntil(() => gateway.sessions.size > before.size, 'the session to open');
  return { client, sent, session: newSession(gateway, before) };
}

const framesOf = (sent: WireFrame[], method: string) => sent.filter((f) => f.method === method);

describe('client subscriptions', () => {
  it('are cold: nothing is sent until the first Observer subscribes', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('echo', (params) => params);
    const { client, sent, session } = await clientWithSession(gateway, url);

    const news$ = client.subscribe<string>('news');
    expect(await client.call('echo', ['barrier'])).toEqual(['barrier']);
    expect(framesOf(sent, 'subscribe')).toEqual([]);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    expect(topicsOf(gateway)).toEqual({});

    const got: string[] = [];
    subscriptions.push(news$.subscribe((v) => got.push(v)));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the server subscription');
    // The client asks for its starting point, so it can resume even before a first message.
    expect(framesOf(sent, 'subscribe').map((f) => f.params)).toEqual([
      ['news', null, { position: true }],
    ]);
    await gateway.publish('news', 'first');
    await waitUntil(() => got.length === 1, 'the first message');
    expect(got).toEqual(['first']);
  });

  it('are shared per topic and params; the last Observer to leave unsubscribes on the server', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { client, sent, session } = await clientWithSession(gateway, url);

    const a: string[] = [];
    const b: string[] = [];
    const subA = client.subscribe<string>('news').subscribe((v) => a.push(v));
    const subB = client.subscribe<string>('news').subscribe((v) => b.push(v));
    subscriptions.push(subA, subB);
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the server subscription');
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);
    expect(framesOf(sent, 'subscribe')).toHaveLength(1);

    await gateway.publish('news', 'one');
    await waitUntil(() => a.length === 1 && b.length === 1, 'both Observers to get it');
    expect([a, b]).toEqual([['one'], ['one']]);

    subA.unsubscribe();
    await gateway.publish('news', 'two');
    await waitUntil(() => b.length === 2, 'the remaining Observer to get it');
    expect(a).toEqual(['one']);
    expect(b).toEqual(['one', 'two']);
    expect(framesOf(sent, 'unsubscribe')).toEqual([]);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);

    subB.unsubscribe();
    await waitUntil(
      () => gateway.pubsub.subscriptionCount(session) === 0,
      'the server subscription to end',
    );
    expect(topicsOf(gateway)).toEqual({});
    const unsubscribes = framesOf(sent, 'unsubscribe');
    expect(unsubscribes).toHaveLength(1);
    expect(typeof (unsubscribes[0]!.params as unknown[])[0]).toBe('string');
  });

  it('different params make separate server subscriptions', async () => {
    const { gateway, url } = await res.gateway();
    const seen: unknown[] = [];
    gateway.topic('news', {
      authorize: ({ params }) => {
        seen.push(params);
        return true;
      },
    });
    const { client, sent, session } = await clientWithSession(gateway, url);
    subscriptions.push(
      client.subscribe('news', { lang: 'en' }).subscribe(),
      client.subscribe('news', { lang: 'fr' }).subscribe(),
      client.subscribe('news', { lang: 'en' }).subscribe(),
    );
    await waitUntil(() => topicsOf(gateway)['news'] === 2, 'two server subscriptions');
    expect(gateway.pubsub.subscriptionCount(session)).toBe(2);
    expect(framesOf(sent, 'subscribe').map((f) => f.params)).toEqual([
      ['news', { lang: 'en' }, { position: true }],
      ['news', { lang: 'fr' }, { position: true }],
    ]);
    expect(seen).toEqual([{ lang: 'en' }, { lang: 'fr' }]);
  });

  it('an Observer that leaves before the subscribe reply arrives still ends the server subscription', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    gateway.method('echo', (params) => params);
    const { client, sent, session } = await clientWithSession(gateway, url);

    // Subscribe and leave at once: the subscribe request is already on its way.
    client.subscribe('news').subscribe().unsubscribe();
    expect(framesOf(sent, 'subscribe')).toHaveLength(1);
    await client.call('echo', [1]);
    await client.call('echo', [2]);
    await waitUntil(
      () => gateway.pubsub.subscriptionCount(session) === 0,
      'the orphaned server subscription to be unsubscribed',
      5_000,
    );
    expect(topicsOf(gateway)).toEqual({});
    expect(framesOf(sent, 'unsubscribe')).toHaveLength(1);
  });

  it('subscribeWithMeta gives each message with its seq', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { client } = await clientWithSession(gateway, url);
    const events: SubscriptionEvent<string>[] = [];
    subscriptions.push(client.subscribeWithMeta<string>('news').subscribe((e) => events.push(e)));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the server subscription');
    for (const text of ['a', 'b', 'c']) await gateway.publish('news', text);
    await waitUntil(() => events.length === 3, 'three messages');
    expect(events).toEqual([
      { data: 'a', seq: 1 },
      { data: 'b', seq: 2 },
      { data: 'c', seq: 3 },
    ]);
  });

  it('resubscribes by itself after the gateway restarts; the same Observer keeps receiving', async () => {
    const first = await res.gateway();
    first.gateway.topic('news');
    const client = res.client(first.url);
    await client.opened();
    const events: SubscriptionEvent<string>[] = [];
    let ended: string | undefined;
    subscriptions.push(
      client.subscribeWithMeta<string>('news').subscribe({
        next: (e) => events.push(e),
        error: (err: unknown) => (ended = `error: ${String(err)}`),
        complete: () => (ended = 'complete'),
      }),
    );
    await waitUntil(() => topicsOf(first.gateway)['news'] === 1, 'the first subscription');
    await first.gateway.publish('news', 'before');
    await waitUntil(() => events.length === 1, 'the message before the restart');

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    // Declared before the event loop turns, so the reconnecting client finds the topic.
    const second = await res.gateway({}, first.port);
    second.gateway.topic('news');

    await waitUntil(() => topicsOf(second.gateway)['news'] === 1, 'the resubscription');
    await second.gateway.publish('news', 'after');
    await waitUntil(() => events.at(-1)?.data === 'after', 'the message after the restart');
    // The new gateway's broker numbers the topic anew: the client is told that what it missed
    // is unknown (a gap of unknown size), then gets the new numbering.
    expect(events).toEqual([
      { data: 'before', seq: 1 },
      { data: undefined, gap: null },
      { data: 'after', seq: 1 },
    ]);
    expect(ended).toBeUndefined();
  });

  it('a rejected subscribe arrives as an Observable error with the JsonRpcError', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { client, session } = await clientWithSession(gateway, url);
    const err = await rejectionOf(firstValueFrom(client.subscribe('nope')));
    expect(err).toBeInstanceOf(JsonRpcError);
    expect(err).toBeInstanceOf(InvalidParamsError);
    expect(err).toMatchObject({ code: ErrorCode.InvalidParams, data: { topic: 'nope' } });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);

    // The failed subscription is forgotten: a later Observer of a valid topic works.
    const next = firstValueFrom(client.subscribe<string>('news'));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the server subscription');
    await gateway.publish('news', 'ok');
    expect(await next).toBe('ok');
  });

  it('custom subscription method names work end to end', async () => {
    const methods = {
      subscribe: 'eth_subscribe',
      notification: 'eth_subscription',
      unsubscribe: 'eth_unsubscribe',
    };
    const { gateway, url } = await res.gateway({ subscriptionMethods: methods });
    gateway.topic('newHeads');
    const { client, sent, session } = await clientWithSession(gateway, url, {
      subscriptionMethods: methods,
    });
    const other: IncomingNotification[] = [];
    subscriptions.push(client.notifications$.subscribe((n) => other.push(n)));

    const heads: number[] = [];
    const sub = client.subscribe<number>('newHeads').subscribe((h) => heads.push(h));
    subscriptions.push(sub);
    await waitUntil(() => topicsOf(gateway)['newHeads'] === 1, 'the server subscription');
    expect(framesOf(sent, 'eth_subscribe').map((f) => f.params)).toEqual([
      ['newHeads', null, { position: true }],
    ]);
    await gateway.publish('newHeads', 17);
    await gateway.publish('newHeads', 18);
    await waitUntil(() => heads.length === 2, 'two heads');
    expect(heads).toEqual([17, 18]);
    // Routed to the subscription, not to the general notification stream.
    expect(other).toEqual([]);

    sub.unsubscribe();
    await waitUntil(() => gateway.pubsub.subscriptionCount(session) === 0, 'eth_unsubscribe');
    expect(framesOf(sent, 'eth_unsubscribe')).toHaveLength(1);
    expect(topicsOf(gateway)).toEqual({});

    // On the wire: the default names are gone, the custom ones carry the messages.
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    expect((await raw.request('subscribe', ['newHeads'])).error).toMatchObject({
      code: ErrorCode.MethodNotFound,
    });
    const id = (await raw.request('eth_subscribe', ['newHeads'])).result as string;
    await gateway.publish('newHeads', 19);
    await raw.until(() => raw.notifications(id, 'eth_subscription').length === 1, 'a head');
    expect(raw.frames.at(-1)).toEqual({
      jsonrpc: '2.0',
      method: 'eth_subscription',
      params: { subscription: id, seq: 3, result: 19 },
    });
    expect((await raw.request('eth_unsubscribe', [id])).result).toBe(true);
  });
});

describe('demo pub/sub', () => {
  it('ticker, chat and countdown work for two clients', async () => {
    const { gateway, url } = await res.gateway();
    registerDemoService(gateway);
    const stopTicker = startTicker(gateway, 20);
    try {
      const alice = res.client(url);
      const bob = res.client(url);
      await Promise.all([alice.opened(), bob.opened()]);

      const ticks = await firstValueFrom(alice.subscribe(Ticker).pipe(take(2), toArray()));
      for (const tick of ticks) {
        expect(tick).toMatchObject({ symbol: 'DEMO' });
        expect(tick.price).toBeGreaterThan(0);
      }

      const aliceChat: ChatMessage[] = [];
      const bobChat: ChatMessage[] = [];
      subscriptions.push(
        alice.subscribe(Chat).subscribe((m) => aliceChat.push(m)),
        bob.subscribe(Chat).subscribe((m) => bobChat.push(m)),
      );
      await waitUntil(() => topicsOf(gateway)['chat'] === 2, 'both chat subscriptions');
      expect(await alice.call(ChatSend, { from: 'alice', text: 'hello bob' })).toBe(1);
      // chat.send publishes for everyone but the sender: bob gets it, alice does not.
      expect(await bob.call(ChatSend, { from: 'bob', text: 'hello alice' })).toBe(2);
      await waitUntil(
        () => aliceChat.length === 1 && bobChat.length === 1,
        `the chat messages ${JSON.stringify([aliceChat, bobChat])}`,
      );
      expect(aliceChat[0]).toMatchObject({ from: 'bob', text: 'hello alice' });
      expect(bobChat[0]).toMatchObject({ from: 'alice', text: 'hello bob' });
      expect(typeof bobChat[0]!.at).toBe('number');

      expect(await firstValueFrom(bob.subscribe(Countdown, { from: 3 }).pipe(toArray()))).toEqual([
        3, 2, 1, 0,
      ]);
      const invalid = await rejectionOf(firstValueFrom(bob.subscribe(Countdown, { from: -1 })));
      expect(invalid).toMatchObject({ code: ErrorCode.InvalidParams });
    } finally {
      stopTicker();
    }
  });
});
