import type { Observable, Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  ErrorCode,
  MemoryBroker,
  ServerError,
  TimeoutError,
  type Gateway,
  type SubscriptionEvent,
} from '../../src/index.js';
import type { ClientOptions } from '../../src/client/client.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { waitForState } from '../support/client.js';
import { RawRpc } from '../support/raw-rpc.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { observeEvents, recordingWebSocket } from '../support/client.js';
import type { RpcClient } from '../../src/client/client.js';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';
import { READ_ATTEMPTS } from '../../src/server/pubsub-resume.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const topicsOf = (gateway: Gateway<unknown>) => gateway.pubsub.topics();
const framesOf = (sent: WireFrame[], method: string) => sent.filter((f) => f.method === method);

const observe = <T>(source: Observable<SubscriptionEvent<T>>) =>
  observeEvents(source, subscriptions);

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

describe('client subscriptions: retries', () => {
  it('a subscribe made while offline longer than callTimeoutMs is established on reconnect', async () => {
    const first = await res.gateway();
    first.gateway.topic('news');
    const client = res.client(first.url, { callTimeoutMs: 200 });
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const seen = observe(client.subscribeWithMeta('news'));
    // A call queued just after it, with the same timeout, times out: so would the subscribe.
    expect(await rejectionOf(client.call('anything'))).toBeInstanceOf(TimeoutError);
    expect(seen.errors).toEqual([]);

    const second = await res.gateway({}, first.port);
    second.gateway.topic('news');
    await waitUntil(() => topicsOf(second.gateway)['news'] === 1, 'the subscription');
    await second.gateway.publish('news', 'hello');
    await waitUntil(() => seen.events.length === 1, 'the message');
    expect(seen.events).toEqual([{ data: 'hello', seq: 1 }]);
    expect(seen.errors).toEqual([]);
  });

  it('a subscribe refused with -32009 Broker unavailable is retried, and resumes with since', async () => {
    const broker = new MemoryBroker();
    const first = await res.gateway({ broker });
    first.gateway.topic('news');
    const sent: WireFrame[] = [];
    const client = res.client(first.url, { WebSocket: recordingWebSocket(sent) });
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(first.gateway)['news'] === 1, 'the first subscription');
    await first.gateway.publish('news', 'before');
    await waitUntil(() => seen.events.length === 1, 'the first message');

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    await broker.publish('news', JSON.stringify('while away'));

    // The broker is "down" for the next two subscribes: the gateway answers -32009.
    let refusals = 0;
    const second = await res.gateway({ broker }, first.port);
    second.gateway.topic('news', {
      authorize: () => {
        if (refusals === 2) return true;
        refusals++;
        throw new ServerError(ErrorCode.BrokerUnavailable, 'Broker unavailable');
      },
    });
    await waitUntil(() => topicsOf(second.gateway)['news'] === 1, 'the resubscription');
    await waitUntil(() => seen.events.length === 2, 'the message published while away');
    expect(refusals).toBe(2);
    expect(seen.events).toEqual([
      { data: 'before', seq: 1 },
      { data: 'while away', seq: 2 },
    ]);
    expect(seen.errors).toEqual([]);
    // Retried on the same connection, each time from where it stopped.
    // The epoch came with the first subscription's position (one memory broker throughout).
    const epoch = expect.any(String) as unknown;
    expect(framesOf(sent, 'subscribe').map((f) => f.params)).toEqual([
      ['news', null, { position: true }],
      ['news', null, { since: 1, epoch }],
      ['news', null, { since: 1, epoch }],
      ['news', null, { since: 1, epoch }],
    ]);
    expect(client.state).toBe('open');
  });
});

describe('client subscriptions: rate limits', () => {
  it('a subscribe refused with -32003 Rate limited is retried, not ended', async () => {
    const { url, gateway } = await res.gateway();
    let refusals = 0;
    gateway.topic('news', {
      authorize: () => {
        if (refusals === 2) return true;
        refusals++;
        throw new ServerError(ErrorCode.RateLimited, 'Rate limited');
      },
    });
    const client = res.client(url, { reconnect: { initialDelayMs: 10, maxDelayMs: 20 } });
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the subscription, third time');
    await gateway.publish('news', 'hello');
    await waitUntil(() => seen.events.length === 1, 'the message');
    expect(refusals).toBe(2);
    expect(seen.errors).toEqual([]);
    expect(seen.events).toEqual([{ data: 'hello', seq: 1 }]);
  });
});

describe('client subscriptions: resume replays', () => {
  it('a replay of 600 messages read together with the subscribe reply arrives whole', async () => {
    const broker = new MemoryBroker();
    const first = await res.gateway({ broker });
    first.gateway.topic('news');
    const client = res.client(first.url);
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(first.gateway)['news'] === 1, 'the first subscription');
    await first.gateway.publish('news', 0);
    await waitUntil(() => seen.events.length === 1, 'the first message');

    await first.gateway.close();
    await waitForState(client, 'reconnecting');
    for (let n = 1; n <= 600; n++) await broker.publish('news', JSON.stringify(n));
    // The resubscribe's reply and the 600 replayed messages leave in one write, so the client
    // takes them off the socket in one read.
    const second = await res.gateway({ broker }, first.port);
    second.gateway.topic('news');
    await waitUntil(() => seen.events.length >= 601, 'the 600 messages published while away');
    expect(seen.events.map((e) => e.seq)).toEqual(Array.from({ length: 601 }, (_, i) => i + 1));
    expect(seen.events.map((e) => e.data)).toEqual(Array.from({ length: 601 }, (_, i) => i));
    expect(seen.errors).toEqual([]);
  });
});

describe('client subscriptions: epochs', () => {
  it('resumes with the epoch, so a gateway whose new broker numbered past `since` says gap: null and replays', async () => {
    const first = await res.gateway({ broker: new MemoryBroker() });
    first.gateway.topic('news');
    // Another gateway with a broker of its own: the same topic, numbered anew, already at 5.
    const second = await res.gateway({ broker: new MemoryBroker() });
    second.gateway.topic('news');
    for (const n of [1, 2, 3, 4, 5]) await second.gateway.publish('news', `new ${n}`);

    const sent: WireFrame[] = [];
    const client = res.client([first.url, second.url], { WebSocket: recordingWebSocket(sent) });
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(first.gateway)['news'] === 1, 'the first subscription');
    for (const n of [1, 2, 3]) await first.gateway.publish('news', `old ${n}`);
    await waitUntil(() => seen.events.length === 3, 'the old messages');

    await first.gateway.close(); // the client moves to the second URL
    await waitUntil(() => seen.events.length === 9, 'the gap and the new numbering');
    expect(seen.events.slice(3)).toEqual([
      { data: undefined, gap: null },
      ...[1, 2, 3, 4, 5].map((n) => ({ data: `new ${n}`, seq: n })),
    ]);
    expect(seen.errors).toEqual([]);
    const [, resume] = framesOf(sent, 'subscribe').map((f) => f.params as unknown[]);
    expect(resume![2]).toMatchObject({ since: 3, epoch: expect.any(String) as unknown });

    // And it resumes in the new numbering from then on.
    await second.gateway.publish('news', 'new 6');
    await waitUntil(() => seen.events.length === 10, 'the next live message');
    expect(seen.events[9]).toEqual({ data: 'new 6', seq: 6 });
  });
});

describe('client subscriptions: history unavailable', () => {
  it('a gap of unknown size without an epoch keeps the position: the next resume replays nothing twice', async () => {
    /**
     * A memory broker whose next history reads fail, its link up (as when Redis answers an
     * error): as many as a replay makes before it gives history up.
     */
    class FlakyHistory extends MemoryBroker {
      failing = 0;
      override history(topic: string, afterSeq: number) {
        if (this.failing === 0) return super.history(topic, afterSeq);
        this.failing--;
        return Promise.reject(new Error('history unavailable'));
      }
    }
    const broker = new FlakyHistory();
    const { gateway, url } = await res.gateway({ broker });
    gateway.topic('news');
    const sent: WireFrame[] = [];
    const client = res.client(url, { WebSocket: recordingWebSocket(sent) });
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the subscription');
    for (const n of [1, 2, 3]) await gateway.publish('news', n);
    await waitUntil(() => seen.events.length === 3, 'the messages');

    broker.failing = READ_ATTEMPTS;
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await waitUntil(() => seen.events.length === 4, 'the gap of unknown size');
    expect(seen.events[3]).toEqual({ data: undefined, gap: null });

    // Dropped again before anything new: the resume asks from 3 again, not from 0.
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await waitUntil(() => framesOf(sent, 'subscribe').length === 3, 'the second resume');
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the resubscription');
    await gateway.publish('news', 4);
    await waitUntil(() => seen.events.length === 5, 'the next message');
    expect(seen.events[4]).toEqual({ data: 4, seq: 4 });
    expect(framesOf(sent, 'subscribe')[2]!.params).toMatchObject(['news', null, { since: 3 }]);
  });
});

describe('client subscriptions: lost before the position', () => {
  /** Reads the state `subscriptionStatus$` last told of the client's subscription to `topic`. */
  const statusOf = (client: RpcClient, topic: string) => {
    let state = '';
    subscriptions.push(subscriptionStatus$(client, topic).subscribe((s) => (state = s.state)));
    return () => state;
  };

  /**
   * A `ws` WebSocket class whose first connection is cut when the frame telling a subscription's
   * position arrives: that frame and any after it are never delivered. The gateway writes the
   * reply and the position together, so this is the one way a client gets the one without the
   * other: a connection lost between the two frames of one write. `onCut` runs at the cut.
   */
  function cutAtFirstPosition(onCut: () => void): WebSocketConstructor {
    let cuts = 0;
    return class CutAtPosition extends WebSocket {
      #cut = false;
      override emit(event: string | symbol, ...args: unknown[]): boolean {
        if (event === 'message' && !this.#cut && cuts === 0) {
          const frame = JSON.parse(String(args[0])) as WireFrame;
          const params = frame.params as { seq?: number; result?: unknown } | undefined;
          if (
            frame.method === 'subscription' &&
            params?.seq !== undefined &&
            !('result' in params)
          ) {
            cuts++;
            this.#cut = true;
            this.terminate();
            onCut();
          }
        }
        if (event === 'message' && this.#cut) return false;
        return super.emit(event, ...args);
      }
    };
  }

  // The client has the subscription's reply (status 'subscribed') but the connection is lost
  // before the position that says where it starts. What is published until the next subscribe
  // cannot be asked for: the client says so with a gap of unknown size.
  it.each([0, 3])(
    'with %i published meanwhile: a gap signal of unknown size, then the messages after the new position',
    async (published) => {
      const { gateway, url } = await res.gateway();
      gateway.topic('news');
      let stateAtCut: string | undefined;
      let publishing: Promise<unknown> = Promise.resolve();
      const client = res.client(url, {
        WebSocket: cutAtFirstPosition(() => {
          stateAtCut = state();
          // Published at the cut, before the client can reconnect: the memory broker numbers
          // each message as it is published.
          const messages = Array.from({ length: published }, (_, i) => i + 1);
          publishing = Promise.all(messages.map((n) => gateway.publish('news', n)));
        }),
      });
      const seen = observe(client.subscribeWithMeta('news'));
      const state = statusOf(client, 'news');
      await waitUntil(() => stateAtCut !== undefined, 'the cut at the position');
      expect(stateAtCut).toBe('subscribed');
      await publishing;

      await waitUntil(
        () =>
          state() === 'subscribed' && topicsOf(gateway)['news'] === 1 && client.state === 'open',
        'the resubscription',
      );
      await gateway.publish('news', 'next');
      await waitUntil(() => seen.events.some((e) => e.data === 'next'), 'the next message');
      expect(seen.events).toEqual([
        { data: undefined, gap: null },
        { data: 'next', seq: published + 1 },
      ]);
      expect(seen.errors).toEqual([]);
    },
  );

  it('a subscription that learnt its position resumes from it: no gap signal, what was published meanwhile replayed', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const client = res.client(url);
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the subscription');
    await gateway.publish('news', 1);
    await waitUntil(() => seen.events.length === 1, 'the first message');
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await gateway.publish('news', 2);
    await waitUntil(() => seen.events.length === 2, 'the replay');
    expect(seen.events).toEqual([
      { data: 1, seq: 1 },
      { data: 2, seq: 2 },
    ]);
  });
});

describe('client subscriptions: a draining server', () => {
  it('a subscribe refused with -32006 Shutting down is retried, and lives on after the server closes', async () => {
    const { gateway, url } = await res.gateway();
    let refusals = 0;
    gateway.topic('news', {
      authorize: () => {
        if (refusals === 1) return true;
        refusals++;
        throw new ServerError(ErrorCode.ShuttingDown, 'Shutting down');
      },
    });
    const sent: WireFrame[] = [];
    const client = res.client(url, { WebSocket: recordingWebSocket(sent) });
    await client.opened();
    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => refusals === 1, 'the refusal');
    expect(seen.errors).toEqual([]);

    // The server closes the connection (as a drain does, with 1012); the subscription is
    // established again, on this connection's retry or on the next one.
    for (const session of gateway.sessions.values()) session.close(1012, 'restart');
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the resubscription');
    await gateway.publish('news', 'after');
    await waitUntil(() => seen.events.length === 1, 'the message');
    expect(seen.events).toEqual([{ data: 'after', seq: 1 }]);
    expect(seen.errors).toEqual([]);
    expect(framesOf(sent, 'subscribe').length).toBeGreaterThanOrEqual(2);
  });
});

describe('client subscriptions: sharing and ids', () => {
  it('params that differ only in key order share one wire subscription', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { client, sent, session } = await clientWithSession(gateway, url);
    const a = observe(
      client.subscribeWithMeta('news', { lang: 'en', filter: { x: 1, y: [2, 3] } }),
    );
    const b = observe(
      client.subscribeWithMeta('news', { filter: { y: [2, 3], x: 1 }, lang: 'en' }),
    );
    await waitUntil(() => topicsOf(gateway)['news'] === 1, 'the server subscription');
    await gateway.publish('news', 'one');
    await waitUntil(() => a.events.length === 1 && b.events.length === 1, 'both Observers');
    expect(framesOf(sent, 'subscribe')).toHaveLength(1);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);
  });

  it('a new Observer given a reused id does not get messages sent before it subscribed', async () => {
    const unsubscribeGate = deferred();
    let gateUnsubscribe = false;
    const { gateway, url } = await res.gateway({
      // Holds the client's unsubscribe so that a message is on its way meanwhile.
      authorize: async ({ method }) => {
        if (method === 'unsubscribe' && gateUnsubscribe) await unsubscribeGate.promise;
        return true;
      },
    });
    gateway.topic('news');
    gateway.method('echo', (params) => params);
    // Another connection keeps the topic, and so its shared id, alive throughout.
    const other = await RawRpc.open(url);
    res.track(other.socket);
    const sharedId = (await other.request('subscribe', ['news'])).result as string;

    const { client, sent, session } = await clientWithSession(gateway, url);
    const first = client.subscribeWithMeta('news').subscribe();
    await waitUntil(() => gateway.pubsub.subscriptionCount(session) === 1, 'the subscription');
    gateUnsubscribe = true;
    first.unsubscribe();
    await waitUntil(() => framesOf(sent, 'unsubscribe').length === 1, 'the unsubscribe');
    expect(framesOf(sent, 'unsubscribe')[0]!.params).toEqual([sharedId]);
    // Still subscribed on the server: this message goes to the id being unsubscribed.
    await gateway.publish('news', 'old');
    expect(await client.call('echo', ['barrier'])).toEqual(['barrier']);
    unsubscribeGate.resolve();
    await waitUntil(() => gateway.pubsub.subscriptionCount(session) === 0, 'the unsubscribe');

    const seen = observe(client.subscribeWithMeta('news'));
    await waitUntil(() => gateway.pubsub.subscriptionCount(session) === 1, 'the resubscription');
    await gateway.publish('news', 'new');
    await waitUntil(() => seen.events.length >= 1, 'a message');
    expect(await client.call('echo', ['barrier'])).toEqual(['barrier']);
    expect(seen.events).toEqual([{ data: 'new', seq: 2 }]);

    // The server did reuse the id (the case under test): the second unsubscribe names it too.
    subscriptions.pop()!.unsubscribe();
    await waitUntil(() => framesOf(sent, 'unsubscribe').length === 2, 'the second unsubscribe');
    expect(framesOf(sent, 'unsubscribe')[1]!.params).toEqual([sharedId]);
  });
});
