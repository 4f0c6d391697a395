import {
  Observable,
  Subject,
  concat,
  finalize,
  firstValueFrom,
  of,
  throwError,
  toArray,
} from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, InvalidParamsError, JsonRpcError } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function raw(url: string): Promise<RawRpc> {
  const socket = await RawRpc.open(url);
  res.track(socket.socket);
  return socket;
}

/** A raw client and the gateway session it is. */
async function rawWithSession<C>(gateway: Gateway<C>, url: string) {
  const before = sessionIds(gateway);
  const client = await raw(url);
  return { client, session: newSession(gateway, before) };
}

const isEmpty = (o: object) => Object.keys(o).length === 0;

/** A real MemoryBroker whose subscribe completes only when the test says so (a slow broker). */
class GatedBroker extends MemoryBroker {
  readonly unsubscribed: string[] = [];
  private opens: (() => void)[] = [];

  get waiting(): number {
    return this.opens.length;
  }

  override async subscribe(
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    if (topic.startsWith('$')) return super.subscribe(topic, deliver);
    await new Promise<void>((resolve) => this.opens.push(resolve));
    return super.subscribe(topic, deliver);
  }

  override unsubscribe(topic: string): Promise<void> {
    this.unsubscribed.push(topic);
    return super.unsubscribe(topic);
  }

  openAll(): void {
    for (const open of this.opens.splice(0)) open();
  }
}

describe('subscription lifecycle', () => {
  it('unsubscribe returns true, releases the topic, and returns false the second time', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const { client, session } = await rawWithSession(gateway, url);

    const a = await client.request('subscribe', ['news']);
    const b = await client.request('subscribe', { topic: 'news' });
    expect(typeof a.result).toBe('string');
    expect(typeof b.result).toBe('string');
    expect(a.result).not.toBe(b.result);
    expect(gateway.pubsub.topics()).toEqual({ news: 2 });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(2);

    expect((await client.request('unsubscribe', [a.result])).result).toBe(true);
    expect(gateway.pubsub.topics()).toEqual({ news: 1 });
    expect((await client.request('unsubscribe', { subscription: b.result })).result).toBe(true);
    expect(gateway.pubsub.topics()).toEqual({});
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);

    expect((await client.request('unsubscribe', [a.result])).result).toBe(false);
    expect((await client.request('unsubscribe', ['0xdoesnotexist'])).result).toBe(false);

    // Nothing arrives for a subscription that has ended.
    await gateway.publish('news', 'late');
    await client.barrier();
    expect(client.notifications()).toEqual([]);
  });

  it('a disconnect releases every topic and stream the session held', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('a');
    gateway.topic('b');
    const tornDown = deferred();
    gateway.stream('forever', () => new Observable(() => () => tornDown.resolve()));
    const { client, session } = await rawWithSession(gateway, url);
    for (const name of ['a', 'b', 'b', 'forever']) {
      expect(typeof (await client.request('subscribe', [name])).result).toBe('string');
    }
    expect(gateway.pubsub.topics()).toEqual({ a: 1, b: 2 });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(4);

    await client.close();
    await within(tornDown.promise, 'the stream teardown');
    await waitUntil(() => gateway.sessions.size === 0, 'the session to close');
    await waitUntil(() => isEmpty(gateway.pubsub.topics()), 'topics to be released');
    expect(gateway.pubsub.topics()).toEqual({});
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
  });

  it('a per-subscriber stream is torn down on unsubscribe, and nothing follows the reply', async () => {
    const { gateway, url } = await res.gateway();
    const source = new Subject<number>();
    let subscribed = 0;
    let finalized = 0;
    gateway.stream('feed', () =>
      new Observable<number>((subscriber) => {
        subscribed++;
        return source.subscribe(subscriber);
      }).pipe(finalize(() => finalized++)),
    );
    const { client, session } = await rawWithSession(gateway, url);
    const id = (await client.request('subscribe', ['feed'])).result as string;
    // The source is subscribed right after the reply went out.
    expect(subscribed).toBe(1);
    source.next(1);
    source.next(2);
    await client.until(() => client.notifications(id).length === 2, 'two stream messages');
    expect(client.notifications(id)).toEqual([
      { subscription: id, result: 1 },
      { subscription: id, result: 2 },
    ]);

    const reply = await client.request('unsubscribe', [id]);
    expect(reply.result).toBe(true);
    expect(finalized).toBe(1);
    expect(source.observed).toBe(false);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    source.next(3);
    await client.barrier();
    expect(client.notifications(id)).toHaveLength(2);
    // No completion frame either: the subscriber ended it.
    expect(client.notifications().filter((p) => p.complete === true)).toEqual([]);
  });

  it('a per-subscriber stream is torn down when its subscriber disconnects', async () => {
    const { gateway, url } = await res.gateway();
    const source = new Subject<number>();
    const finalized = deferred();
    gateway.stream('feed', () => source.pipe(finalize(() => finalized.resolve())));
    const { client } = await rawWithSession(gateway, url);
    const id = (await client.request('subscribe', ['feed'])).result as string;
    source.next(1);
    await client.until(() => client.notifications(id).length === 1, 'one stream message');
    expect(source.observed).toBe(true);

    await client.close();
    await within(finalized.promise, 'the stream finalize');
    expect(source.observed).toBe(false);
  });

  it('stream completion and failure reach the client as completion and a JsonRpcError', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('three', () => of(1, 2, 3));
    gateway.stream('fails', () =>
      concat(
        of('a'),
        throwError(() => new JsonRpcError(-32050, 'stream broke', { why: 'test' })),
      ),
    );
    gateway.stream('crashes', () => throwError(() => new Error('secret detail')));
    const before = sessionIds(gateway);
    const client = res.client(url);
    await client.opened();
    const session = newSession(gateway, before);

    expect(await firstValueFrom(client.subscribe<number>('three').pipe(toArray()))).toEqual([
      1, 2, 3,
    ]);

    const seen: string[] = [];
    const failure = await new Promise<unknown>((resolve, reject) => {
      client.subscribe<string>('fails').subscribe({
        next: (v) => seen.push(v),
        error: resolve,
        complete: () => reject(new Error('completed instead of failing')),
      });
    });
    expect(seen).toEqual(['a']);
    expect(failure).toBeInstanceOf(JsonRpcError);
    expect(failure).toMatchObject({ code: -32050, message: 'stream broke', data: { why: 'test' } });

    const crash = await rejectionOf(firstValueFrom(client.subscribe('crashes')));
    expect(crash).toBeInstanceOf(JsonRpcError);
    expect(crash).toMatchObject({ code: ErrorCode.InternalError, message: 'Internal error' });
    expect(JSON.stringify((crash as JsonRpcError).data ?? null)).not.toContain('secret detail');

    // Ended streams are gone from the session.
    await waitUntil(() => gateway.pubsub.subscriptionCount(session) === 0, 'streams to end');
  });

  it('a stream that emits on subscribe sends the subscribe reply before its first message', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('three', () => of(1, 2, 3));
    const client = await raw(url);
    client.send({ jsonrpc: '2.0', method: 'subscribe', params: { topic: 'three' }, id: 7 });
    await client.until(() => client.frames.length === 5, 'reply, three messages, completion');
    const id = client.frames[0]!.result as string;
    expect(client.frames).toEqual([
      { jsonrpc: '2.0', result: id, id: 7 },
      { jsonrpc: '2.0', method: 'subscription', params: { subscription: id, result: 1 } },
      { jsonrpc: '2.0', method: 'subscription', params: { subscription: id, result: 2 } },
      { jsonrpc: '2.0', method: 'subscription', params: { subscription: id, result: 3 } },
      { jsonrpc: '2.0', method: 'subscription', params: { subscription: id, complete: true } },
    ]);
    expect(typeof id).toBe('string');
  });

  it('the same ordering holds for a stream subscribed inside a batch', async () => {
    const { gateway, url } = await res.gateway();
    gateway.stream('three', () => of(1, 2, 3));
    const client = await raw(url);
    client.send([
      { jsonrpc: '2.0', method: 'subscribe', params: ['three'], id: 1 },
      { jsonrpc: '2.0', method: 'rpc.ping', id: 2 },
    ]);
    await client.until(() => client.frames.length === 5, 'batch reply, messages, completion');
    const batchReply = client.frames[0] as unknown as { id: number; result: string }[];
    expect(Array.isArray(batchReply)).toBe(true);
    const id = batchReply.find((r) => r.id === 1)!.result;
    expect(client.notifications(id).map((p) => p.result ?? p.complete)).toEqual([1, 2, 3, true]);
  });
});

describe('rejected subscriptions', () => {
  it('unknown topic, unauthorized topic, failing stream handler and too many subscriptions are error replies and never get a message', async () => {
    const seenByAuthorize: { user: unknown; topic: string; params: unknown }[] = [];
    const { gateway, url } = await res.gateway<{ user: string | null }>({
      authenticate: (request) => ({ user: request.query.get('user') }),
      limits: { maxSubscriptions: 2 },
    });
    gateway.topic('secret', {
      authorize: ({ session, topic, params }) => {
        seenByAuthorize.push({ user: session.context.user, topic, params });
        return session.context.user === 'alice';
      },
    });
    gateway.topic('open');
    gateway.topic('open2');
    gateway.topic('open3');
    let strictCalled = 0;
    gateway.stream('strict', (params: unknown) => {
      strictCalled++;
      throw new InvalidParamsError('strict takes { n: number }', { got: params });
    });

    const before = sessionIds(gateway);
    const bob = await raw(`${url}?user=bob`);
    const session = newSession(gateway, before);

    const unknown = await bob.request('subscribe', ['nope']);
    expect(unknown.error).toMatchObject({ code: ErrorCode.InvalidParams, data: { topic: 'nope' } });
    expect(unknown.result).toBeUndefined();

    const denied = await bob.request('subscribe', ['secret', { room: 1 }]);
    expect(denied.error).toMatchObject({ code: ErrorCode.Unauthorized });
    expect(seenByAuthorize).toEqual([{ user: 'bob', topic: 'secret', params: { room: 1 } }]);

    const invalid = await bob.request('subscribe', ['strict', { n: 'x' }]);
    expect(invalid.error).toEqual({
      code: ErrorCode.InvalidParams,
      message: 'strict takes { n: number }',
      data: { got: { n: 'x' } },
    });
    expect(strictCalled).toBe(1);

    const first = (await bob.request('subscribe', ['open'])).result as string;
    const second = (await bob.request('subscribe', ['open2'])).result as string;
    const tooMany = await bob.request('subscribe', ['open3']);
    expect(tooMany.error).toMatchObject({
      code: ErrorCode.TooManySubscriptions,
      data: { limit: 2 },
    });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(2);
    expect(gateway.pubsub.topics()).toEqual({ open: 1, open2: 1 });

    // Malformed subscribe params are rejected too.
    expect((await bob.request('subscribe', [])).error).toMatchObject({ code: -32602 });
    expect((await bob.request('subscribe', { params: 1 })).error).toMatchObject({ code: -32602 });

    for (const topic of ['nope', 'secret', 'strict', 'open3', 'open', 'open2']) {
      await gateway.publish(topic, { topic });
    }
    await bob.barrier();
    expect(bob.notifications().map((p) => p.subscription)).toEqual([first, second]);

    // The hook really decides: alice may subscribe, and gets the topic's messages.
    const alice = await raw(`${url}?user=alice`);
    const allowed = await alice.request('subscribe', ['secret']);
    expect(typeof allowed.result).toBe('string');
    await gateway.publish('secret', 'for alice');
    await alice.until(() => alice.notifications().length === 1, 'a message for alice');
    expect(alice.notifications()[0]).toEqual({
      subscription: allowed.result,
      seq: 2,
      result: 'for alice',
    });
    expect(seenByAuthorize.at(-1)).toEqual({ user: 'alice', topic: 'secret', params: undefined });
  });

  it('subscribes racing for the last slot (one batch) leave nothing behind once unsubscribed', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxSubscriptions: 1 } });
    gateway.topic('a');
    const { client, session } = await rawWithSession(gateway, url);
    client.send([
      { jsonrpc: '2.0', method: 'subscribe', params: ['a'], id: 1 },
      { jsonrpc: '2.0', method: 'subscribe', params: ['a'], id: 2 },
    ]);
    await client.until(() => client.frames.length === 1, 'the batch reply');
    const replies = client.frames[0] as unknown as {
      id: number;
      result?: string;
      error?: unknown;
    }[];
    const ok = replies.filter((r) => typeof r.result === 'string');
    const refused = replies.filter((r) => r.error !== undefined);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.error).toMatchObject({ code: ErrorCode.TooManySubscriptions });
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);
    expect(gateway.pubsub.topics()).toEqual({ a: 1 });

    expect((await client.request('unsubscribe', [ok[0]!.result])).result).toBe(true);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    // The refused subscribe must not keep holding the topic.
    expect(gateway.pubsub.topics()).toEqual({});
  });

  it('a subscribe sent as a notification (no id) leaves no subscription behind', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxSubscriptions: 1 } });
    gateway.topic('a');
    const { client, session } = await rawWithSession(gateway, url);
    client.send({ jsonrpc: '2.0', method: 'subscribe', params: ['a'] });
    await client.barrier();
    // Nobody can ever learn the id of such a subscription, so it must not exist...
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    expect(gateway.pubsub.topics()).toEqual({});
    // ...nor use up the session's only slot.
    expect(typeof (await client.request('subscribe', ['a'])).result).toBe('string');
  });
});

describe('cancelled subscribes', () => {
  it('rpc.cancel while authorize is pending: -32001, and nothing held (registry empty, slot free)', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxSubscriptions: 1 } });
    const verdict = deferred<boolean>();
    const asked = deferred();
    gateway.topic('slow', {
      authorize: () => {
        asked.resolve();
        return verdict.promise;
      },
    });
    gateway.topic('other');
    const { client, session } = await rawWithSession(gateway, url);

    const id = client.nextId();
    client.send({ jsonrpc: '2.0', method: 'subscribe', params: ['slow'], id });
    await within(asked.promise, 'authorize to be asked');
    client.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
    await client.barrier(); // the cancel has been handled
    verdict.resolve(true);

    expect((await client.response(id)).error).toMatchObject({ code: ErrorCode.RequestCancelled });
    await client.barrier();
    expect(gateway.pubsub.topics()).toEqual({});
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    // The only slot is free again.
    expect(typeof (await client.request('subscribe', ['other'])).result).toBe('string');
    await gateway.publish('slow', 'nobody');
    await client.barrier();
    expect(client.notifications()).toEqual([]);
  });

  it('rpc.cancel while the broker is subscribing: -32001, and the topic is released on the broker', async () => {
    const broker = new GatedBroker();
    const { gateway, url } = await res.gateway({ broker, limits: { maxSubscriptions: 1 } });
    gateway.topic('gated');
    const { client, session } = await rawWithSession(gateway, url);

    const id = client.nextId();
    client.send({ jsonrpc: '2.0', method: 'subscribe', params: ['gated'], id });
    await waitUntil(() => broker.waiting === 1, 'the broker subscribe');
    client.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
    await client.barrier();
    broker.openAll();

    expect((await client.response(id)).error).toMatchObject({ code: ErrorCode.RequestCancelled });
    expect(gateway.pubsub.topics()).toEqual({});
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
    await waitUntil(() => broker.unsubscribed.includes('gated'), 'the broker unsubscribe');
    const again = client.request('subscribe', ['gated']);
    await waitUntil(() => broker.waiting === 1, 'the second broker subscribe');
    broker.openAll();
    expect(typeof (await again).result).toBe('string');
  });

  it('rpc.cancel while a stream handler is building its Observable: -32001, never started', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxSubscriptions: 1 } });
    const built = deferred<Observable<number>>();
    const asked = deferred();
    let started = 0;
    gateway.stream('later', () => {
      asked.resolve();
      return built.promise;
    });
    const { client, session } = await rawWithSession(gateway, url);

    const id = client.nextId();
    client.send({ jsonrpc: '2.0', method: 'subscribe', params: ['later'], id });
    await within(asked.promise, 'the stream handler');
    client.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
    await client.barrier();
    built.resolve(new Observable<number>(() => void started++));

    expect((await client.response(id)).error).toMatchObject({ code: ErrorCode.RequestCancelled });
    await client.barrier();
    expect(started).toBe(0);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(0);
  });
});

describe('topics', () => {
  it('a prefix topic chat.* matches chat.room-7; the longest prefix decides', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('chat.*');
    gateway.topic('chat.vip.*', { authorize: () => false });
    const client = await raw(url);

    const room7 = (await client.request('subscribe', ['chat.room-7'])).result as string;
    expect(typeof room7).toBe('string');
    expect(gateway.pubsub.topics()).toEqual({ 'chat.room-7': 1 });
    expect((await client.request('subscribe', ['chatroom'])).error).toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { topic: 'chatroom' },
    });
    expect((await client.request('subscribe', ['chat.vip.lounge'])).error).toMatchObject({
      code: ErrorCode.Unauthorized,
    });

    await gateway.publish('chat.room-8', 'elsewhere');
    await gateway.publish('chat.room-7', 'hello 7');
    await client.until(() => client.notifications().length === 1, 'a chat.room-7 message');
    await client.barrier();
    expect(client.notifications()).toEqual([{ subscription: room7, seq: 1, result: 'hello 7' }]);
  });

  it('keeps publish order across many rapid publishes', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('rapid');
    const client = await raw(url);
    const id = (await client.request('subscribe', ['rapid'])).result as string;
    const count = 2_000;
    const seqs = Array.from({ length: count }, (_, i) => gateway.publish('rapid', { i }));
    expect(await Promise.all(seqs)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    await client.until(() => client.notifications(id).length === count, `${count} messages`);
    const got = client.notifications(id);
    got.forEach((m, i) => {
      expect(m.seq).toBe(i + 1);
      expect(m.result).toEqual({ i });
      expect(m.missed).toBeUndefined();
    });
    expect(gateway.pubsub.stats.dropped).toBe(0);
  });

  it('publishFrom pipes an Observable into a topic until unsubscribed', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    const client = await raw(url);
    const id = (await client.request('subscribe', ['feed'])).result as string;
    const source = new Subject<unknown>();
    const piping = gateway.publishFrom('feed', source);
    source.next(1);
    source.next({ two: 2 });
    source.next(undefined);
    await client.until(() => client.notifications(id).length === 3, 'three piped messages');
    expect(client.notifications(id)).toEqual([
      { subscription: id, seq: 1, result: 1 },
      { subscription: id, seq: 2, result: { two: 2 } },
      { subscription: id, seq: 3, result: null },
    ]);

    piping.unsubscribe();
    expect(source.observed).toBe(false);
    source.next('not published');
    // The next seq is 4: the value after unsubscribe never reached the broker.
    expect(await gateway.publish('feed', 'direct')).toBe(4);
    await client.until(() => client.notifications(id).length === 4, 'the direct message');
    expect(client.notifications(id)[3]).toEqual({ subscription: id, seq: 4, result: 'direct' });
  });

  it('publishFrom tells onError of each value not published, with why, and goes on', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('feed');
    const client = await raw(url);
    const id = (await client.request('subscribe', ['feed'])).result as string;
    const source = new Subject<unknown>();
    const failed: [unknown, unknown][] = [];
    gateway.publishFrom('feed', source, { onError: (err, value) => failed.push([err, value]) });
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    source.next(1);
    source.next(10n);
    source.next(cycle);
    source.next(2);
    await client.until(() => client.notifications(id).length === 2, 'the two good values');
    await client.until(() => failed.length === 2, 'the two refused');
    expect(client.notifications(id).map((n) => n.result)).toEqual([1, 2]);
    expect(failed.map(([err]) => err)).toEqual([expect.any(TypeError), expect.any(TypeError)]);
    expect(failed.map(([, value]) => value)).toEqual([10n, cycle]);
  });
});

describe('subscription ids', () => {
  it('are unique within a connection even for the same topic twice', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('twice');
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const first = (await raw.request('subscribe', ['twice'])).result as string;
    const second = (await raw.request('subscribe', ['twice'])).result as string;
    expect(first).not.toBe(second);
    await gateway.publish('twice', 7);
    await raw.until(
      () => raw.notifications(first).length === 1 && raw.notifications(second).length === 1,
      'both subscriptions to get the message',
    );
    expect(raw.notifications(first)[0]!.result).toBe(7);
    expect(raw.notifications(second)[0]!.result).toBe(7);
    expect((await raw.request('unsubscribe', [first])).result).toBe(true);
    expect(gateway.pubsub.topics()).toEqual({ twice: 1 });
  });
});
