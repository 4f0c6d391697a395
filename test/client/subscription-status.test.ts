/*
 * subscriptionStatus$ against a real gateway: what it reports from the client's subscription as
 * the manager moves it (subscribe sent, accepted, lost with the connection, resubscribed,
 * refused, a stream's error and end, unsubscribed, the client closed), and that observing it
 * never subscribes.
 */
import { Observable, Subject, throwError } from 'rxjs';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import type {
  SubscriptionStatus,
  SubscriptionStatusState,
} from '../../src/client/subscription-status.js';
import { ErrorCode, JsonRpcError, ServerError } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

/** Everything a status Observable says, and whether it completed. */
function record(source: Observable<SubscriptionStatus>) {
  const seen = { statuses: [] as SubscriptionStatus[], done: false };
  subscriptions.push(
    source.subscribe({
      next: (s) => seen.statuses.push(s),
      complete: () => (seen.done = true),
    }),
  );
  return {
    seen,
    states: (): SubscriptionStatusState[] => seen.statuses.map((s) => s.state),
  };
}

const keep = (s: Subscription): Subscription => (subscriptions.push(s), s);

describe('subscriptionStatus$ over a real gateway', () => {
  it('closed, connecting, subscribed, resuming after the session is closed, subscribed, closed; observing alone never subscribes', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const client = res.client(url);
    await client.opened();

    const status = record(subscriptionStatus$(client, 'news'));
    expect(status.states()).toEqual(['closed']);
    // Nothing was asked of the server.
    expect(gateway.pubsub.topics()['news'] ?? 0).toBe(0);

    const data: unknown[] = [];
    const sub = keep(client.subscribe('news').subscribe((d) => data.push(d)));
    expect(status.states()).toEqual(['closed', 'connecting']);
    await waitUntil(() => status.states().length === 3, 'the reply');
    expect(status.states()[2]).toBe('subscribed');
    expect(gateway.pubsub.topics()['news']).toBe(1);

    await gateway.publish('news', 'one');
    await gateway.publish('news', 'two');
    await waitUntil(() => data.length === 2, 'two messages');
    // A message is not a change of state.
    expect(status.states()).toEqual(['closed', 'connecting', 'subscribed']);

    for (const session of gateway.sessions.values()) session.close(4001, 'test drop');
    await waitUntil(() => status.states().length === 5, 'the resume');
    expect(status.seen.statuses.slice(3)).toEqual([
      { state: 'resuming', seq: 2 },
      { state: 'subscribed', seq: 2 },
    ]);
    await waitUntil(() => gateway.pubsub.topics()['news'] === 1, 'the subscription on the server');

    sub.unsubscribe();
    expect(status.states().at(-1)).toBe('closed');
    await waitUntil(() => (gateway.pubsub.topics()['news'] ?? 0) === 0, 'the unsubscribe');
    expect(status.states()).toEqual([
      'closed',
      'connecting',
      'subscribed',
      'resuming',
      'subscribed',
      'closed',
    ]);
    expect(status.seen.done).toBe(false);
  });

  it('a status observed while subscribed starts with subscribed, and the topic/params pair is the one subscribe shares', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const client = res.client(url);
    keep(client.subscribe('news', { lang: 'en', region: 'eu' }).subscribe());
    await waitUntil(() => gateway.pubsub.topics()['news'] === 1, 'the subscription');
    await waitUntil(
      () =>
        record(subscriptionStatus$(client, 'news', { region: 'eu', lang: 'en' })).states()[0] ===
        'subscribed',
      'the reply',
    );
    expect(record(subscriptionStatus$(client, 'news', { lang: 'fr' })).states()).toEqual([
      'closed',
    ]);
    expect(record(subscriptionStatus$(client, 'news')).states()).toEqual(['closed']);
  });

  it('a refused subscribe is error, with the JsonRpcError, until a new subscribe', async () => {
    const { gateway, url } = await res.gateway();
    let allow = false;
    gateway.topic('secret', { authorize: () => allow });
    const client = res.client(url);
    const status = record(subscriptionStatus$(client, 'secret'));
    const errors: unknown[] = [];
    keep(client.subscribe('secret').subscribe({ error: (err: unknown) => errors.push(err) }));
    await waitUntil(() => errors.length === 1, 'the refusal');
    expect(status.states()).toEqual(['closed', 'connecting', 'error']);
    const { error } = status.seen.statuses[2]!;
    expect(error).toBeInstanceOf(JsonRpcError);
    expect((error as JsonRpcError).code).toBe(ErrorCode.Unauthorized);
    expect(error).toBe(errors[0]);

    // Other subscriptions coming and going leave it as it is.
    gateway.topic('other');
    const other = keep(client.subscribe('other').subscribe());
    await waitUntil(() => gateway.pubsub.topics()['other'] === 1, 'the other subscription');
    other.unsubscribe();
    expect(status.states()).toEqual(['closed', 'connecting', 'error']);

    allow = true;
    keep(client.subscribe('secret').subscribe());
    await waitUntil(() => status.states().length === 5, 'the second subscribe');
    expect(status.states().slice(3)).toEqual(['connecting', 'subscribed']);
  });

  it("a stream's error is error; its completion is closed", async () => {
    const { gateway, url } = await res.gateway();
    const ends = new Subject<'fail' | 'complete'>();
    gateway.stream('job', () => {
      return new Observable<number>((subscriber) => {
        subscriber.next(1);
        const sub = ends.subscribe((end) => {
          if (end === 'complete') subscriber.complete();
          else throwError(() => new ServerError(-32050, 'job failed')).subscribe(subscriber);
        });
        return () => sub.unsubscribe();
      });
    });
    const client = res.client(url);

    const failing = record(subscriptionStatus$(client, 'job', { run: 1 }));
    const failed: unknown[] = [];
    keep(client.subscribe('job', { run: 1 }).subscribe({ error: (e: unknown) => failed.push(e) }));
    await waitUntil(() => failing.states().at(-1) === 'subscribed', 'the first run');
    ends.next('fail');
    await waitUntil(() => failed.length === 1, 'the stream error');
    expect(failing.states()).toEqual(['closed', 'connecting', 'subscribed', 'error']);
    expect((failing.seen.statuses[3]!.error as JsonRpcError).message).toBe('job failed');

    const ending = record(subscriptionStatus$(client, 'job', { run: 2 }));
    let completed = false;
    keep(client.subscribe('job', { run: 2 }).subscribe({ complete: () => (completed = true) }));
    await waitUntil(() => ending.states().at(-1) === 'subscribed', 'the second run');
    ends.next('complete');
    await waitUntil(() => completed, 'the stream end');
    expect(ending.states()).toEqual(['closed', 'connecting', 'subscribed', 'closed']);
  });

  it('closing the client is closed, and completes', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const client = res.client(url);
    const status = record(subscriptionStatus$(client, 'news'));
    keep(client.subscribe('news').subscribe());
    await waitUntil(() => status.states().at(-1) === 'subscribed', 'the reply');
    await client.close();
    expect(status.states()).toEqual(['closed', 'connecting', 'subscribed', 'closed']);
    expect(status.seen.done).toBe(true);

    // Observed after the close: closed, and done.
    const late = record(subscriptionStatus$(client, 'news'));
    expect(late.states()).toEqual(['closed']);
    expect(late.seen.done).toBe(true);
  });

  it('refuses an object that is not a client made by createClient', () => {
    const errors: unknown[] = [];
    subscriptionStatus$({} as never, 'news').subscribe({ error: (e: unknown) => errors.push(e) });
    expect(errors[0]).toBeInstanceOf(TypeError);
  });
});
