/**
 * A refresh (`rpc.authenticate` on a live connection) that lands while a subscribe, a history
 * read, a `$presence` subscribe or a server-side join awaits (the topic's `authorize`, the
 * broker's subscribe) weighs that call too: it takes effect only if the identity in force then
 * allows it, else it is answered -32004 and holds nothing. The race is made by gates the test
 * opens after the refresh was answered, never by timing.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { deleteRedisKeys, REDIS_URL } from '../support/brokers.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { canConnect } from '../support/network.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawReply, RawRpc } from './raw-rpc.js';

const redisReachable = await canConnect(6379);
const prefix = `wsrpc-test-refresh-race:${randomBytes(6).toString('hex')}`;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  if (redisReachable) await deleteRedisKeys(REDIS_URL, prefix);
});

const FULL = token({ user: 'ann', ttl: 600_000, topics: ['secret.*', 'news.*'] });
const NARROW = token({ user: 'ann', ttl: 600_000, topics: ['news.*'] });

/**
 * A topic `authorize` hook whose first `gated` calls of a subscribe (not a refresh's) wait for
 * the test to open them; every call is recorded with whether it was a refresh's.
 */
class GatedAuthorize {
  readonly calls: { topic: string; refresh: boolean }[] = [];
  private readonly waiting: Deferred<void>[] = [];
  private readonly entries: Deferred<void>[] = [];

  constructor(private gated = 1) {}

  readonly authorize = async ({ topic, refresh }: { topic: string; refresh?: boolean }) => {
    this.calls.push({ topic, refresh: refresh === true });
    if (this.gated > 0 && refresh !== true) {
      this.gated--;
      const gate = deferred();
      this.waiting.push(gate);
      this.entered(this.waiting.length - 1).resolve();
      await gate.promise;
    }
    return true;
  };

  /** Resolves once the `n`th gated call (from 0) waits. */
  entered(n = 0): Deferred<void> {
    while (this.entries.length <= n) this.entries.push(deferred());
    return this.entries[n]!;
  }

  open(n = 0): void {
    this.waiting[n]!.resolve();
  }
}

/**
 * The broker, with its subscribe to a topic of `gatedTopics` held until the test opens it (the
 * broker's own round trip, made as long as the test needs). Every unsubscribe is recorded.
 */
function gatedBroker(inner: Broker, gatedTopics: ReadonlySet<string>) {
  const entered = deferred();
  const gate = deferred();
  const unsubscribed: string[] = [];
  const broker = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'subscribe') {
        return async (topic: string, deliver: Parameters<Broker['subscribe']>[1]) => {
          if (gatedTopics.has(topic)) {
            entered.resolve();
            await gate.promise;
          }
          return target.subscribe(topic, deliver);
        };
      }
      if (prop === 'unsubscribe') {
        return (topic: string) => {
          unsubscribed.push(topic);
          return target.unsubscribe(topic);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function'
        ? (value as (...a: unknown[]) => unknown).bind(target)
        : value;
    },
  });
  return { broker, entered: entered.promise, open: () => gate.resolve(), unsubscribed };
}

async function start(
  options: Partial<GatewayOptions<TestContext>> = {},
): Promise<RunningGateway<TestContext>> {
  const running = await startGateway<TestContext>({ ...tokenIdentity(), ...options });
  cleanups.push(() => running.gateway.close());
  running.gateway.topic('news.*');
  return running;
}

async function redisBroker(): Promise<RedisBroker> {
  const broker = await RedisBroker.create({
    url: REDIS_URL,
    prefix: `${prefix}:${randomBytes(4).toString('hex')}:`,
  });
  cleanups.push(() => broker.close());
  return broker;
}

async function open(url: string, bearer = FULL): Promise<RawRpc> {
  const socket = await openRawRpc(url, { authorization: `Bearer ${bearer}` });
  cleanups.push(() => socket.close());
  return socket;
}

async function refresh(socket: RawRpc, bearer: string): Promise<void> {
  const reply = await socket.request('rpc.authenticate', { token: bearer });
  expect(reply.error).toBeUndefined();
}

/**
 * The messages `socket` received from a publish to `topic` (on any subscription): published,
 * then followed by one on `news.probe` (the socket's subscription `probe`), whose arrival shows
 * the first one was delivered to whoever held it.
 */
async function deliveredOn(
  running: RunningGateway<TestContext>,
  socket: RawRpc,
  probe: string,
  topic: string,
): Promise<unknown[]> {
  const before = socket.notifications.length;
  await running.gateway.publish(topic, { on: topic });
  await running.gateway.publish('news.probe', { probe: true });
  await waitUntil(
    () =>
      socket.notifications
        .slice(before)
        .some((n) => (n.params as { subscription?: string }).subscription === probe),
    'the probe message',
  );
  return socket.notifications
    .map((n) => (n.params as { result?: { on?: unknown } }).result)
    .filter((result) => result?.on === topic);
}

async function probeOf(socket: RawRpc): Promise<string> {
  const reply = await socket.request('subscribe', ['news.probe']);
  expect(reply.error).toBeUndefined();
  return reply.result as string;
}

function expectRefused(reply: RawReply, topic: string): void {
  expect(reply.result).toBeUndefined();
  expect(reply.error).toMatchObject({ code: ErrorCode.Unauthorized, data: { topic } });
}

describe('a refresh while a subscribe to a topic is under way', () => {
  it('refuses the subscribe (-32004) when the new claims no longer allow the topic (async authorize)', async () => {
    const hook = new GatedAuthorize();
    const running = await start();
    running.gateway.topic('secret.*', { authorize: hook.authorize });
    const socket = await open(running.url);
    const probe = await probeOf(socket);
    const subscribing = socket.request('subscribe', ['secret.x']);
    await hook.entered().promise;
    await refresh(socket, NARROW);
    hook.open();
    const reply = await subscribing;
    expectRefused(reply, 'secret.x');
    expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([]);
    // Nothing held: no subscription left, the topic released on this node.
    const [session] = running.gateway.sessions.values();
    expect(running.gateway.pubsub.subscriptionCount(session!)).toBe(1);
    expect(running.gateway.pubsub.topics()).not.toHaveProperty('secret.x');
  });

  it('keeps the subscribe when the new claims still allow it, asking authorize again as a refresh', async () => {
    const hook = new GatedAuthorize();
    const running = await start();
    running.gateway.topic('secret.*', { authorize: hook.authorize });
    const socket = await open(running.url);
    const probe = await probeOf(socket);
    const subscribing = socket.request('subscribe', ['secret.x']);
    await hook.entered().promise;
    await refresh(socket, FULL);
    hook.open();
    const reply = await subscribing;
    expect(reply.error).toBeUndefined();
    expect(hook.calls).toEqual([
      { topic: 'secret.x', refresh: false },
      { topic: 'secret.x', refresh: true },
    ]);
    expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([{ on: 'secret.x' }]);
  });

  it('refuses the subscribe (-32004) when the refresh lands during the broker subscribe (memory broker)', async () => {
    const gated = gatedBroker(new MemoryBroker(), new Set(['secret.x']));
    const running = await start({ broker: gated.broker });
    running.gateway.topic('secret.*');
    const socket = await open(running.url);
    const probe = await probeOf(socket);
    const subscribing = socket.request('subscribe', ['secret.x']);
    await gated.entered;
    await refresh(socket, NARROW);
    gated.open();
    const reply = await subscribing;
    expectRefused(reply, 'secret.x');
    expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([]);
    expect(gated.unsubscribed).toContain('secret.x');
    expect(running.gateway.pubsub.topics()).not.toHaveProperty('secret.x');
  });

  it.skipIf(!redisReachable)(
    'refuses the subscribe (-32004) when the refresh lands during the Redis SUBSCRIBE',
    async () => {
      const gated = gatedBroker(await redisBroker(), new Set(['secret.x']));
      const running = await start({ broker: gated.broker });
      running.gateway.topic('secret.*');
      const socket = await open(running.url);
      const probe = await probeOf(socket);
      const subscribing = socket.request('subscribe', ['secret.x']);
      await gated.entered;
      await refresh(socket, NARROW);
      gated.open();
      const reply = await subscribing;
      expectRefused(reply, 'secret.x');
      expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([]);
      expect(gated.unsubscribed).toContain('secret.x');
      expect(running.gateway.pubsub.topics()).not.toHaveProperty('secret.x');
    },
  );

  it.skipIf(!redisReachable)(
    'refuses the subscribe (-32004) when the refresh lands during an async authorize (Redis broker)',
    async () => {
      const hook = new GatedAuthorize();
      const running = await start({ broker: await redisBroker() });
      running.gateway.topic('secret.*', { authorize: hook.authorize });
      const socket = await open(running.url);
      const probe = await probeOf(socket);
      const subscribing = socket.request('subscribe', ['secret.x']);
      await hook.entered().promise;
      await refresh(socket, NARROW);
      hook.open();
      const reply = await subscribing;
      expectRefused(reply, 'secret.x');
      expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([]);
      expect(running.gateway.pubsub.topics()).not.toHaveProperty('secret.x');
    },
  );

  it('refuses a history read (-32004) when the refresh lands while it is authorized', async () => {
    const hook = new GatedAuthorize();
    const running = await start();
    running.gateway.topic('secret.*', { authorize: hook.authorize, history: { maxLength: 10 } });
    await running.gateway.publish('secret.x', { kept: 1 });
    const socket = await open(running.url);
    const reading = socket.request('topic.history', { topic: 'secret.x' });
    await hook.entered().promise;
    await refresh(socket, NARROW);
    hook.open();
    expectRefused(await reading, 'secret.x');
  });

  it('refuses a $presence subscribe (-32004) when the refresh lands while it is authorized', async () => {
    const hook = new GatedAuthorize();
    const running = await start();
    running.gateway.topic('secret.*', { authorize: hook.authorize, presence: true });
    const socket = await open(running.url);
    const subscribing = socket.request('subscribe', ['$presence', { topic: 'secret.x' }]);
    await hook.entered().promise;
    await refresh(socket, NARROW);
    hook.open();
    expectRefused(await subscribing, 'secret.x');
    const [session] = running.gateway.sessions.values();
    expect(running.gateway.pubsub.subscriptionCount(session!)).toBe(0);
  });

  it('refuses a server-side join (-32004) when the refresh lands while it is authorized', async () => {
    const hook = new GatedAuthorize();
    const running = await start();
    running.gateway.topic('secret.*', { authorize: hook.authorize });
    const socket = await open(running.url);
    const probe = await probeOf(socket);
    const [session] = running.gateway.sessions.values();
    const joining = running.gateway.join(session!.id, 'secret.x').then(
      () => undefined,
      (err: unknown) => err,
    );
    await hook.entered().promise;
    await refresh(socket, NARROW);
    hook.open();
    expect(await joining).toMatchObject({ code: ErrorCode.Unauthorized });
    expect(await deliveredOn(running, socket, probe, 'secret.x')).toEqual([]);
    expect(running.gateway.pubsub.subscriptionCount(session!)).toBe(1);
    expect(socket.notifications.filter((n) => n.method === 'rpc.joined')).toEqual([]);
  });
});

/**
 * Any interleaving of subscribes, refreshes (to the full or the narrow claims) and the opening
 * of the subscribes' `authorize` gates, in any order. By the model: a subscribe sent under the
 * narrow claims is refused at once; one held in `authorize` is answered by the claims in force
 * when its gate opens (an id under the full ones, -32004 under the narrow ones); a narrowing
 * refresh ends every granted subscription. Once everything is answered a publish reaches
 * exactly the granted subscriptions no narrowing refresh ended since.
 */
describe('a model of subscribes and refreshes interleaved', () => {
  type Step =
    { kind: 'subscribe' } | { kind: 'refresh'; full: boolean } | { kind: 'open'; pick: number };
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.constant<Step>({ kind: 'subscribe' }),
    fc.boolean().map<Step>((full) => ({ kind: 'refresh', full })),
    fc.nat(7).map<Step>((pick) => ({ kind: 'open', pick })),
  );

  it('each subscribe takes effect under the claims in force then; none outlives them', async () => {
    const running = await start();
    let hook = new GatedAuthorize(0);
    running.gateway.topic('secret.*', { authorize: (request) => hook.authorize(request) });
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (steps) => {
        const topic = `secret.r${++round}`;
        hook = new GatedAuthorize(Number.POSITIVE_INFINITY);
        const socket = await open(running.url);
        try {
          const probe = await probeOf(socket);
          let full = true;
          /** Granted subscriptions no narrowing refresh has ended since. */
          let alive = 0;
          /** Subscribes held in authorize: their gate's number and reply. */
          const held: { gate: number; reply: Promise<RawReply> }[] = [];
          let gates = 0;
          const openOne = async (pick: number) => {
            const [{ gate, reply }] = held.splice(pick % held.length, 1) as [(typeof held)[0]];
            const grantedByModel = full;
            hook.open(gate);
            const answer = await reply;
            if (grantedByModel) {
              expect(answer.error).toBeUndefined();
              alive++;
            } else expect(answer.error).toMatchObject({ code: ErrorCode.Unauthorized });
          };
          for (const s of steps) {
            if (s.kind === 'subscribe') {
              const reply = socket.request('subscribe', [topic]);
              if (full) {
                const gate = gates++;
                await hook.entered(gate).promise;
                held.push({ gate, reply });
              } else {
                expect((await reply).error).toMatchObject({ code: ErrorCode.Unauthorized });
              }
            } else if (s.kind === 'refresh') {
              await refresh(socket, s.full ? FULL : NARROW);
              full = s.full;
              if (!full) alive = 0;
            } else if (held.length > 0) await openOne(s.pick);
          }
          while (held.length > 0) await openOne(0);
          const delivered = await deliveredOn(running, socket, probe, topic);
          expect(delivered.length).toBe(alive);
        } finally {
          socket.close();
          await waitUntil(() => running.gateway.sessions.size === 0, 'the socket closed');
        }
      }),
      { numRuns: 40 },
    );
  });
});
