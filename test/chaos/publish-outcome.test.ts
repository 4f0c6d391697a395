/**
 * What a publisher is told when its publish meets a broker fault, and what subscribers get:
 *   - the publish reached the broker, which stored it, but its answer was lost (the node's
 *     broker connection dropped before the answer came back): the publisher is told -32009 "the
 *     message may have been published", and every subscriber gets the message, with its seq;
 *   - the node's broker link was down when it published: -32009 "the message was not
 *     published", and no subscriber ever gets it.
 * Real Redis and NATS (the shared ones on 6379 and 4222, under a prefix of this test), two
 * gateways: A, whose broker connection runs through a relay that drops the answer to one
 * publish (or is cut), and B, where the subscriber is. What the subscriber gets is checked with
 * the chaos accounting: every accepted publish delivered once in order, nothing else missing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { JsonRpcError } from '../../src/protocol/errors.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { Subscriber } from '../support/cluster.js';
import { deleteNatsStreams, deleteRedisKeys, brokersUp } from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import { Resources } from '../support/resources.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/waiting.js';
import { PublishLog, accountSubscription } from './accounting.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
const ports: Record<BrokerKind, number> = { redis: 6379, nats: 4222 };
const prefix = `wsrpcoutcome${randomBytes(5).toString('hex')}`;

const res = new Resources();
const closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await res.cleanup();
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

afterAll(async () => {
  if (up.redis) await deleteRedisKeys('redis://127.0.0.1:6379', prefix);
  if (up.nats) await deleteNatsStreams(prefix).catch(() => undefined);
});

async function broker(kind: BrokerKind, port: number): Promise<Broker> {
  const made =
    kind === 'redis'
      ? await RedisBroker.create({ url: `redis://127.0.0.1:${port}`, prefix: `${prefix}:` })
      : await NatsBroker.connect({
          servers: `nats://127.0.0.1:${port}`,
          prefix,
          timeoutMs: 2_000,
          reconnectWaitMs: 50,
        });
  closers.push(() => made.close());
  return made;
}

/** How a publish through the client ended: its seq, or the JSON-RPC error. */
async function outcome(
  call: Promise<unknown>,
): Promise<{ seq: number } | { code: number; message: string }> {
  try {
    return { seq: (await call) as number };
  } catch (err) {
    if (!(err instanceof JsonRpcError)) throw err;
    return { code: err.code, message: err.message };
  }
}

describe.each(['redis', 'nats'] as const)('a publish meeting a broker fault (%s)', (kind) => {
  it.skipIf(!up[kind] && !mustRun)(
    'an answer lost: told the message may have been published, and subscribers get it; a link down: told it was not, and nobody gets it',
    async () => {
      const relay = new TcpRelay(ports[kind]);
      await relay.start();
      closers.push(() => relay.cut());
      const brokerA = await broker(kind, relay.port);
      const a = await res.gateway({ broker: brokerA });
      const b = await res.gateway({ broker: await broker(kind, ports[kind]) });
      const topic = `feed-${randomBytes(4).toString('hex')}`;
      for (const { gateway } of [a, b]) gateway.topic(topic);
      a.gateway.method('pub', (params) => a.gateway.publish(topic, params));
      const subscriber = new Subscriber('S@B', res.client(b.url), topic);
      await waitFor(() => subscriber.knowsItsStart(), 'the subscriber to have its position');
      const publisher = res.client(a.url);
      const log = new PublishLog([topic]);
      const publish = async (): Promise<ReturnType<typeof outcome>> => {
        const record = log.start(topic, 0, 'outcome');
        const told = await outcome(publisher.call('pub', { t: topic, i: record.i }));
        if ('seq' in told) log.accept(record, told.seq);
        else log.reject(record, told.message);
        return told;
      };

      expect(await publish()).toEqual({ seq: 1 });
      // The next publish's command holds its payload `{"t":...,"i":2}`: its answer is lost.
      relay.loseAnswerTo(`"i":2}`);
      expect(await publish()).toEqual({
        code: -32009,
        message: 'Broker unavailable: the message may have been published',
      });
      expect(relay.lost).toBe(1);
      await waitFor(() => brokerA.ready, 'A linked to the broker again');
      expect(await publish()).toEqual({ seq: 3 });

      // A's link is down: nothing reaches the broker.
      await relay.cut();
      await waitFor(() => !brokerA.ready, 'A to notice its link is down');
      expect(await publish()).toEqual({
        code: -32009,
        message: 'Broker unavailable: the message was not published',
      });
      await relay.restore();
      await waitFor(() => brokerA.ready, 'A linked to the broker again');
      expect(await publish()).toEqual({ seq: 4 });
      await waitFor(() => subscriber.events.some((e) => e.seq === 4), 'seq 4 at the subscriber');

      // The message whose answer was lost came with seq 2; the one never published, never.
      expect(subscriber.events.map((e) => [e.seq, (e.data as { i: number }).i])).toEqual([
        [1, 1],
        [2, 2],
        [3, 3],
        [4, 5],
      ]);
      const account = accountSubscription(
        'S@B',
        topic,
        subscriber.events.map((e) => ({ ...e, at: 0 })),
        log,
      );
      expect(account.problems).toEqual([]);
      expect([...account.outcomes.values()]).toEqual(['delivered', 'delivered', 'delivered']);
      expect(account.unacknowledged).toBe(1);
    },
    30_000,
  );
});

describe('a NATS publish that timed out before it was sent', () => {
  it.skipIf(!up.nats && !mustRun)(
    'is told it was not published, and is not sent when the step it waited for completes late',
    async () => {
      const timeoutMs = 300;
      const brokerA = await NatsBroker.connect({
        servers: 'nats://127.0.0.1:4222',
        prefix,
        timeoutMs,
        reconnectWaitMs: 50,
      });
      closers.push(() => brokerA.close());
      // Setting up the topic's stream (the step before the message is sent) waits for the test.
      const streams = (brokerA as unknown as { streams: { ensureStream: EnsureStream } }).streams;
      type EnsureStream = (...args: unknown[]) => Promise<void>;
      const ensure = streams.ensureStream.bind(streams);
      const gates: (() => void)[] = [];
      const ensured: Promise<void>[] = [];
      streams.ensureStream = async (...args) => {
        await new Promise<void>((resolve) => gates.push(resolve));
        const made = ensure(...args);
        ensured.push(made);
        return made;
      };
      const b = await res.gateway({ broker: await broker('nats', 4222) });
      const topic = `feed-${randomBytes(4).toString('hex')}`;
      b.gateway.topic(topic);
      const subscriber = new Subscriber('S@B', res.client(b.url), topic);
      await waitFor(() => subscriber.knowsItsStart(), 'the subscriber to have its position');

      const late = await brokerA.publish(topic, JSON.stringify('late')).then(
        (seq) => ({ seq }),
        (err: unknown) => ({ error: err instanceof Error ? err.name : String(err) }),
      );
      // No answer within timeoutMs: it was not sent, so it was not published.
      expect(late).toEqual({ error: 'NatsBrokerUnavailableError' });
      for (const open of gates.splice(0)) open();
      await waitFor(() => ensured.length === 1, 'the stream step to go on');
      // The step is done: a publish still going on from here would be sent now.
      await ensured[0];
      expect(await b.gateway.publish(topic, 'next')).toBe(1);
      expect(await b.gateway.publish(topic, 'marker')).toBe(2);
      await waitFor(() => subscriber.events.length >= 2, 'two messages at the subscriber');
      expect(subscriber.events).toEqual([
        { data: 'next', seq: 1 },
        { data: 'marker', seq: 2 },
      ]);
    },
    30_000,
  );
});

describe.each(['redis', 'nats'] as const)(
  'a notifyUser to an inbox meeting a lost answer (%s)',
  (kind) => {
    it.skipIf(!up[kind] && !mustRun)(
      'is told the message may have been sent, and the user gets it, numbered',
      async () => {
        const relay = new TcpRelay(ports[kind]);
        await relay.start();
        closers.push(() => relay.cut());
        interface Ctx {
          user: string | undefined;
        }
        const inboxes = {
          authenticate: ({ query }: { query: URLSearchParams }) => ({
            user: query.get('user') ?? undefined,
          }),
          userOf: (context: Ctx) => context.user,
          userInbox: true,
        };
        const brokerA = await broker(kind, relay.port);
        const a = await res.gateway<Ctx>({ broker: brokerA, ...inboxes });
        const b = await res.gateway<Ctx>({ broker: await broker(kind, ports[kind]), ...inboxes });
        const user = `u${randomBytes(4).toString('hex')}`;
        const client = res.client(`${b.url}?user=${user}`, { inbox: true });
        const got: unknown[] = [];
        client.notificationsOf('hello').subscribe((params) => got.push(params));
        await waitFor(() => b.gateway.pubsub.topics()[`~inbox.${user}`] === 1, 'the inbox held');

        expect(await a.gateway.notifyUser(user, 'hello', { n: 1 })).toBe(1);
        relay.loseAnswerTo(`"n":2}`);
        const lost = await a.gateway.notifyUser(user, 'hello', { n: 2 }).then(
          (seq) => ({ seq }),
          (err: unknown) => ({ message: (err as Error).message }),
        );
        expect(lost).toEqual({ message: 'Broker unavailable: the message may have been sent' });
        await waitFor(() => brokerA.ready, 'A linked to the broker again');
        expect(await a.gateway.notifyUser(user, 'hello', { n: 3 })).toBe(3);
        await waitFor(() => got.length === 3, 'three messages at the user');
        expect(got).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      },
      30_000,
    );
  },
);
