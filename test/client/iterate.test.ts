/*
 * iterate() against a real gateway: `for await` over a topic, `break` unsubscribing on the
 * server, a slow loop losing exactly what overflows its buffer (drop-oldest) or ending with
 * BufferOverflowError, a refused subscribe thrown from next(), a stream's end ending the loop.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Observable } from 'rxjs';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferOverflowError, iterate } from '../../src/client/async-iterate.js';
import { ErrorCode, JsonRpcError } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const subscriptions: Subscription[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await res.cleanup();
});

const held = (gateway: Gateway<unknown>, topic: string): number =>
  gateway.pubsub.topics()[topic] ?? 0;

async function newsGateway() {
  const running = await res.gateway();
  running.gateway.topic('news');
  const client = res.client(running.url);
  await client.opened();
  return { ...running, client };
}

describe('iterate over a real gateway', () => {
  it('for await gets the messages in order; break unsubscribes on the server', async () => {
    const { gateway, client } = await newsGateway();
    const got: number[] = [];
    const publishing = (async () => {
      await waitUntil(() => held(gateway, 'news') === 1, 'the subscription');
      for (let n = 1; n <= 5; n++) await gateway.publish('news', n);
    })();
    for await (const n of iterate<number>(client, 'news')) {
      got.push(n);
      if (got.length === 3) break;
    }
    await publishing;
    expect(got).toEqual([1, 2, 3]);
    await waitUntil(() => held(gateway, 'news') === 0, 'the unsubscribe on the server');
    const [session] = gateway.sessions.values();
    expect(gateway.pubsub.subscriptionCount(session!)).toBe(0);
  });

  it('a loop that waits while 20 messages arrive keeps the newest bufferSize and counts the rest', async () => {
    const { gateway, client } = await newsGateway();
    // A second Observer of the same subscription tells when all 20 have reached the client.
    let arrived = 0;
    subscriptions.push(client.subscribe('news').subscribe(() => arrived++));
    const allArrived = deferred();
    const messages = iterate<number>(client, 'news', undefined, { bufferSize: 5 });
    const got: number[] = [];
    const loop = (async () => {
      for await (const n of messages) {
        got.push(n);
        // Slow: the first message's work lasts until every other one has come.
        if (got.length === 1) await allArrived.promise;
        if (got.length === 6) break;
      }
    })();
    await waitUntil(() => held(gateway, 'news') === 1, 'the subscription');
    for (let n = 1; n <= 20; n++) await gateway.publish('news', n);
    await waitUntil(() => arrived === 20, 'the 20 messages at the client');
    allArrived.resolve();
    await loop;
    // 1 taken at once; 2..20 came while it worked: 5 held (16..20), 14 dropped.
    expect(got).toEqual([1, 16, 17, 18, 19, 20]);
    expect(messages.dropped).toBe(14);
  });

  it('messages dropped for a full buffer are let go at once, not held until the buffer is cut', async () => {
    setFlagsFromString('--expose_gc');
    const gc = runInNewContext('gc') as () => void;
    const { gateway, client } = await newsGateway();
    // A second Observer of the same subscription sees the same objects, and keeps only weakly.
    const seen: WeakRef<object>[] = [];
    subscriptions.push(
      client.subscribe<object>('news').subscribe((m) => seen.push(new WeakRef(m))),
    );
    const allArrived = deferred();
    const messages = iterate<{ n: number }>(client, 'news', undefined, { bufferSize: 5 });
    const got: number[] = [];
    const loop = (async () => {
      for await (const { n } of messages) {
        got.push(n);
        if (got.length === 1) await allArrived.promise;
        if (got.length === 6) break;
      }
    })();
    await waitUntil(() => held(gateway, 'news') === 1, 'the subscription');
    for (let n = 1; n <= 20; n++) await gateway.publish('news', { n, pad: 'x'.repeat(1_000) });
    await waitUntil(() => seen.length === 20, 'the 20 messages at the client');
    await new Promise((resolve) => setTimeout(resolve, 10));
    gc();
    // 1 taken; 2..15 dropped (none may be held); 16..20 in the buffer.
    const alive = seen.map((ref, i) => (ref.deref() ? i + 1 : 0)).filter((n) => n > 0);
    expect(alive.filter((n) => n >= 2 && n <= 15)).toEqual([]);
    expect(alive.filter((n) => n >= 16)).toEqual([16, 17, 18, 19, 20]);
    allArrived.resolve();
    await loop;
    expect(got).toEqual([1, 16, 17, 18, 19, 20]);
  });

  it("overflow 'error': the messages held are taken, then next() rejects with BufferOverflowError; the subscription is gone", async () => {
    const { gateway, client } = await newsGateway();
    const messages = iterate<number>(client, 'news', undefined, {
      bufferSize: 3,
      overflow: 'error',
    });
    const first = messages.next();
    await waitUntil(() => held(gateway, 'news') === 1, 'the subscription');
    for (let n = 1; n <= 10; n++) await gateway.publish('news', n);
    expect(await first).toEqual({ done: false, value: 1 });
    await waitUntil(() => held(gateway, 'news') === 0, 'the unsubscribe on the server');
    const rest: number[] = [];
    let failure: unknown;
    try {
      for (;;) {
        const r = await messages.next();
        if (r.done) break;
        rest.push(r.value);
      }
    } catch (err) {
      failure = err;
    }
    expect(rest).toEqual([2, 3, 4]);
    expect(failure).toBeInstanceOf(BufferOverflowError);
    expect((failure as BufferOverflowError).bufferSize).toBe(3);
    expect(await messages.next()).toEqual({ done: true, value: undefined });
    expect(messages.dropped).toBe(0);
  });

  it('a refused subscribe rejects next() with the JsonRpcError', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('secret', { authorize: () => false });
    const client = res.client(url);
    let failure: unknown;
    try {
      for await (const message of iterate(client, 'secret')) expect(message).toBeUndefined();
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeInstanceOf(JsonRpcError);
    expect((failure as JsonRpcError).code).toBe(ErrorCode.Unauthorized);
  });

  it("a stream's completion ends the loop", async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream(
      'countdown',
      ({ from }: { from: number }) =>
        new Observable<number>((subscriber) => {
          for (let n = from; n >= 0; n--) subscriber.next(n);
          subscriber.complete();
        }),
    );
    const client = res.client(url);
    const got: number[] = [];
    for await (const n of iterate<number>(client, 'countdown', { from: 3 })) got.push(n);
    expect(got).toEqual([3, 2, 1, 0]);
  });
});
