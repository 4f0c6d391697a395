/**
 * limits.maxTopics: the topics a node holds on the broker for its clients (a subscriber on the
 * node, or a watched `$presence`) never pass the limit, whatever clients subscribe to. A subscribe
 * that would add one is answered -32000 with `data: { topic, maxTopics }`; subscribes to topics
 * already held go on, and a topic let go of makes room again. Checked against a model (the set of
 * topics with a subscriber) over random subscribes and unsubscribes from several connections,
 * and on `rpc_topics_held`.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, MemoryBroker } from '../../src/index.js';
import { INBOX_TOPIC_PREFIX } from '../../src/server/session-router.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';
import type { RawRpc } from '../support/raw-rpc.js';

const res = new Resources();
afterEach(() => res.cleanup());

const busy = (topic: string, maxTopics: number) => ({
  code: ErrorCode.ServerBusy,
  message: expect.stringContaining('(limits.maxTopics)') as unknown,
  data: { topic, maxTopics },
});

async function topicsHeld(httpUrl: string): Promise<number | undefined> {
  return sampleValue(await scrape(httpUrl), 'rpc_topics_held');
}

describe('limits.maxTopics', () => {
  it('refuses a subscribe that would add a topic past the limit, -32000, and counts $presence channels', async () => {
    const { gateway, url, httpUrl } = await res.gateway({
      limits: { maxTopics: 3, metricsCacheMs: 0 },
    });
    gateway.topic('room.*', { presence: true });
    const a = await openRaw(res, url);
    const b = await openRaw(res, url);
    const one = (await a.request('subscribe', ['room.1'])).result as string;
    expect(
      (await a.request('subscribe', ['$presence', { topic: 'room.9' }])).error,
    ).toBeUndefined();
    expect((await b.request('subscribe', ['room.2'])).error).toBeUndefined();
    expect(await topicsHeld(httpUrl)).toBe(3);
    expect((await b.request('subscribe', ['room.3'])).error).toEqual(busy('room.3', 3));
    expect((await b.request('subscribe', ['$presence', { topic: 'room.4' }])).error).toEqual(
      busy('room.4', 3),
    );
    // Topics the node holds already take no room: another connection joins them.
    expect((await b.request('subscribe', ['room.1'])).error).toBeUndefined();
    expect(
      (await b.request('subscribe', ['$presence', { topic: 'room.9' }])).error,
    ).toBeUndefined();
    // room.1 is let go of once neither holds it.
    expect((await a.request('unsubscribe', [one])).result).toBe(true);
    expect((await b.request('subscribe', ['room.3'])).error).toEqual(busy('room.3', 3));
    await b.request('unsubscribe', [(await b.request('subscribe', ['room.1'])).result]);
    const held = gateway.pubsub.topics();
    expect(Object.keys(held).sort()).toEqual(['room.1', 'room.2']);
  });

  it('holds exactly the topics of the model, never more than maxTopics, over random subscribes and unsubscribes', async () => {
    const maxTopics = 4;
    const { gateway, url, httpUrl } = await res.gateway({
      // A scrape or two per run of the property: no probe rate to refuse one.
      limits: { maxTopics, metricsCacheMs: 0, probeRequestsPerSecondPerIp: 0 },
    });
    gateway.topic('t.*');
    const sockets: RawRpc[] = [];
    for (let i = 0; i < 3; i++) sockets.push(await openRaw(res, url));
    const op = fc.oneof(
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('subscribe' as const),
          who: fc.nat({ max: 2 }),
          topic: fc.nat({ max: 6 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('unsubscribe' as const),
          who: fc.nat({ max: 2 }),
          pick: fc.nat(),
        }),
      },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30, size: 'max' }), async (ops) => {
        // The model: each connection's subscriptions (id -> topic); a topic is held while any has it.
        const subs = sockets.map(() => new Map<string, string>());
        const heldTopics = () => new Set(subs.flatMap((m) => [...m.values()]));
        try {
          for (const step of ops) {
            const socket = sockets[step.who]!;
            const mine = subs[step.who]!;
            if (step.kind === 'subscribe') {
              const topic = `t.${step.topic}`;
              const held = heldTopics();
              const reply = await socket.request('subscribe', [topic]);
              if (held.has(topic) || held.size < maxTopics) {
                expect(reply.error).toBeUndefined();
                mine.set(reply.result as string, topic);
              } else {
                expect(reply.error).toEqual(busy(topic, maxTopics));
              }
            } else if (mine.size > 0) {
              const id = [...mine.keys()][step.pick % mine.size]!;
              expect((await socket.request('unsubscribe', [id])).result).toBe(true);
              mine.delete(id);
            }
            expect(gateway.pubsub.topicsHeld()).toBe(heldTopics().size);
          }
          expect(await topicsHeld(httpUrl)).toBe(heldTopics().size);
        } finally {
          for (const [i, mine] of subs.entries()) {
            for (const id of mine.keys()) await sockets[i]!.request('unsubscribe', [id]);
          }
        }
      }),
      { numRuns: 25 },
    );
  });
  it('$presence subscribes sent together to new topics: no more are accepted than maxTopics', async () => {
    const maxTopics = 2;
    const { gateway, url } = await res.gateway({ limits: { maxTopics } });
    gateway.topic('room.*', { presence: true });
    const a = await openRaw(res, url);
    const replies = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((i) => a.request('subscribe', ['$presence', { topic: `room.${i}` }])),
    );
    expect(replies.filter((r) => r.error === undefined)).toHaveLength(maxTopics);
    for (const refused of replies.filter((r) => r.error !== undefined)) {
      expect(refused.error).toMatchObject({ code: ErrorCode.ServerBusy, data: { maxTopics } });
    }
    expect(gateway.pubsub.topicsHeld()).toBe(maxTopics);
  });

  it('a user’s $inbox is never refused for maxTopics: it is the gateway’s own hold', async () => {
    // The broker refuses inbox topics until `open`: the session router's own hold on ann's
    // inbox fails (it retries later), so her `$inbox` subscribe is the one that adds the topic.
    const broker = new MemoryBroker();
    let open = false;
    const subscribe = broker.subscribe.bind(broker);
    broker.subscribe = (topic, deliver) =>
      !open && topic.startsWith(INBOX_TOPIC_PREFIX)
        ? Promise.reject(new Error('refused'))
        : subscribe(topic, deliver);
    const { gateway, url } = await res.gateway<{ user: string | undefined }>({
      broker,
      authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
      userOf: (context) => context.user,
      userInbox: { maxLength: 10 },
      limits: { maxTopics: 1 },
    });
    gateway.topic('room.*');
    const a = await openRaw(res, `${url}?user=ann`);
    expect((await a.request('subscribe', ['room.1'])).error).toBeUndefined();
    expect((await a.request('subscribe', ['room.2'])).error).toEqual(busy('room.2', 1));
    open = true;
    const reply = await a.request('subscribe', ['$inbox']);
    expect(reply.error).toBeUndefined();
    expect(typeof reply.result).toBe('string');
    expect(gateway.pubsub.topicsHeld()).toBe(2);
  });

  it('the server’s own gateway.presence(topic) reads hold no topic', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxTopics: 3 } });
    gateway.topic('room.*', { presence: true });
    for (let i = 0; i < 5; i++) await gateway.presence(`room.${i}`).count();
    expect(gateway.pubsub.topicsHeld()).toBe(0);
    const a = await openRaw(res, url);
    expect((await a.request('subscribe', ['room.x'])).error).toBeUndefined();
    expect(gateway.pubsub.topicsHeld()).toBe(1);
  });
});
