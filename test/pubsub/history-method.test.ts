import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_HISTORY_PAGE_BYTES } from '../../src/server/pubsub-history.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { MAX_HISTORY_PAGE } from '../../src/pubsub/history-params.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Context {
  topics?: string[];
}

/** A gateway whose sessions' topic claims come from the URL (`?topics=a,b.*`). */
async function start(options: { subscriptionMethods?: { history: string } } = {}) {
  const running = await res.gateway<Context>({
    authenticate: ({ query }) => {
      const topics = query.get('topics');
      return topics === null ? {} : { topics: topics.split(',') };
    },
    identity: { topicsOf: (context) => context.topics },
    ...options,
  });
  const { gateway } = running;
  gateway.topic('feed.*', { history: { maxLength: 5 } });
  gateway.topic('big', { history: { maxLength: 1_000 } });
  gateway.topic('secret', { authorize: () => false });
  return running;
}

async function open(url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  return raw;
}

describe('the history method', () => {
  it('over HTTP POST, leaves nothing behind once answered', async () => {
    const { gateway, httpUrl } = await start();
    await gateway.publish('feed.a', { n: 1 });
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${httpUrl}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          method: 'topic.history',
          params: { topic: 'feed.a', last: 1 },
          id: i,
        }),
      });
      const answer = (await response.json()) as { result: { messages: unknown[] } };
      expect(answer.result.messages).toEqual([{ seq: 1, data: { n: 1 } }]);
    }
    // What a session's subscriptions and read slots are kept in: none for an exchange that ended.
    const tables = (gateway.pubsub as unknown as { tables: Map<unknown, unknown> }).tables;
    await waitUntil(() => tables.size === 0, "the exchanges' tables released");
  });

  it('reads the last N, since a seq, and pages with limit, like a resume would see them', async () => {
    const { gateway, url } = await start();
    for (let n = 1; n <= 3; n++) await gateway.publish('feed.a', { n });
    const raw = await open(url);

    const last2 = await raw.request('topic.history', { topic: 'feed.a', last: 2 });
    expect(last2.result).toEqual({
      messages: [
        { seq: 2, data: { n: 2 } },
        { seq: 3, data: { n: 3 } },
      ],
      lastSeq: 3,
      epoch: expect.any(String) as unknown,
    });
    const since1 = await raw.request('topic.history', { topic: 'feed.a', since: 1 });
    expect((since1.result as { messages: unknown[] }).messages).toEqual([
      { seq: 2, data: { n: 2 } },
      { seq: 3, data: { n: 3 } },
    ]);
    const page = await raw.request('topic.history', { topic: 'feed.a', since: 0, limit: 1 });
    expect(page.result).toMatchObject({ messages: [{ seq: 1, data: { n: 1 } }], lastSeq: 3 });
    expect(page.result).not.toHaveProperty('truncated');
    // Positional: [topic, options].
    const positional = await raw.request('topic.history', ['feed.a', { last: 1 }]);
    expect(positional.result).toMatchObject({ messages: [{ seq: 3 }], lastSeq: 3 });
    // Neither last nor since: the last `limit` (all three here).
    const plain = await raw.request('topic.history', { topic: 'feed.a' });
    expect((plain.result as { messages: unknown[] }).messages).toHaveLength(3);
    // Past the end, and a topic nobody published to: nothing, not truncated.
    expect(
      (await raw.request('topic.history', { topic: 'feed.a', since: 3 })).result,
    ).toMatchObject({
      messages: [],
      lastSeq: 3,
    });
    expect((await raw.request('topic.history', { topic: 'feed.none', last: 5 })).result).toEqual({
      messages: [],
      lastSeq: 0,
    });
  });

  it('says truncated when the retention trimmed what was asked for', async () => {
    const { gateway, url } = await start();
    for (let n = 1; n <= 10; n++) await gateway.publish('feed.b', n);
    const raw = await open(url);
    const since0 = await raw.request('topic.history', { topic: 'feed.b', since: 0 });
    expect(since0.result).toMatchObject({
      messages: [6, 7, 8, 9, 10].map((n) => ({ seq: n, data: n })),
      lastSeq: 10,
      truncated: true,
    });
    const last8 = await raw.request('topic.history', { topic: 'feed.b', last: 8 });
    expect(last8.result).toMatchObject({ lastSeq: 10, truncated: true });
    expect((last8.result as { messages: unknown[] }).messages).toHaveLength(5);
    const last5 = await raw.request('topic.history', { topic: 'feed.b', last: 5 });
    expect(last5.result).not.toHaveProperty('truncated');
  });

  it(`answers at most ${MAX_HISTORY_PAGE} messages a call`, async () => {
    const { gateway, url } = await start();
    for (let n = 1; n <= MAX_HISTORY_PAGE + 20; n++) await gateway.publish('big', n);
    const raw = await open(url);
    const first = await raw.request('topic.history', { topic: 'big', since: 0 });
    const messages = (first.result as { messages: { seq: number }[] }).messages;
    expect(messages).toHaveLength(MAX_HISTORY_PAGE);
    expect(messages.at(-1)!.seq).toBe(MAX_HISTORY_PAGE);
    const next = await raw.request('topic.history', { topic: 'big', since: MAX_HISTORY_PAGE });
    expect((next.result as { messages: unknown[] }).messages).toHaveLength(20);
  });

  it('is authorized like a subscribe: the claims, then the topic authorize (-32004)', async () => {
    const { gateway, url } = await start();
    await gateway.publish('feed.c', 'x');
    const limited = await open(`${url}?topics=feed.ok`);
    const outside = await limited.request('topic.history', { topic: 'feed.c', last: 1 });
    expect(outside.error).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'feed.c' },
    });
    // The same answer a subscribe gets.
    const subscribe = await limited.request('subscribe', ['feed.c']);
    expect(subscribe.error).toMatchObject({
      code: outside.error!.code,
      message: outside.error!.message,
    });
    const raw = await open(url);
    const hookSaysNo = await raw.request('topic.history', { topic: 'secret', last: 1 });
    expect(hookSaysNo.error).toMatchObject({ code: ErrorCode.Unauthorized });
    expect(
      (await raw.request('topic.history', { topic: 'feed.c', last: 1 })).error,
    ).toBeUndefined();
  });

  it('refuses unknown topics and bad bounds with -32602 naming the field', async () => {
    const { url } = await start();
    const raw = await open(url);
    expect((await raw.request('topic.history', { topic: 'nope', last: 1 })).error).toMatchObject({
      code: ErrorCode.InvalidParams,
      message: 'Unknown topic',
    });
    expect((await raw.request('topic.history', { topic: '$node.x' })).error?.code).toBe(
      ErrorCode.InvalidParams,
    );
    const cases: [unknown, string][] = [
      [{ topic: 'feed.a', last: 0 }, 'last'],
      [{ topic: 'feed.a', last: MAX_HISTORY_PAGE + 1 }, 'last'],
      [{ topic: 'feed.a', since: -1 }, 'since'],
      [{ topic: 'feed.a', since: 1.5 }, 'since'],
      [{ topic: 'feed.a', last: 1, since: 1 }, 'since'],
      [{ topic: 'feed.a', limit: 0 }, 'limit'],
      [{ topic: 'feed.a', limit: MAX_HISTORY_PAGE + 1 }, 'limit'],
      [{ topic: 'feed.a', other: 1 }, 'other'],
      [{ topic: 7 }, 'topic'],
    ];
    for (const [params, field] of cases) {
      const reply = await raw.request('topic.history', params);
      expect(reply.error, JSON.stringify(params)).toMatchObject({
        code: ErrorCode.InvalidParams,
        data: { field },
      });
    }
  });

  it('takes the name configured in subscriptionMethods, and the client reads through it', async () => {
    const { gateway, url } = await start({ subscriptionMethods: { history: 'past' } });
    await gateway.publish('feed.d', { v: 1 });
    await gateway.publish('feed.d', { v: 2 });
    const raw = await open(url);
    expect((await raw.request('topic.history', { topic: 'feed.d' })).error?.code).toBe(
      ErrorCode.MethodNotFound,
    );
    expect((await raw.request('past', { topic: 'feed.d', last: 1 })).result).toMatchObject({
      messages: [{ seq: 2, data: { v: 2 } }],
    });
    const client = res.client(url, { subscriptionMethods: { history: 'past' } });
    const read = await client.history<{ v: number }>('feed.d', { since: 0, limit: 1 });
    expect(read).toMatchObject({ messages: [{ seq: 1, data: { v: 1 } }], lastSeq: 2 });
    expect(read.messages[0]!.data.v).toBe(1);
  });
});

describe('the history method: pages bounded in bytes', () => {
  it('ends a page before the message that would take it past MAX_HISTORY_PAGE_BYTES; paging on reads every message once, in order', async () => {
    const { gateway, url } = await start();
    gateway.topic('large.*', { history: { maxLength: 1_000 } });
    const raw = await open(url);
    const KIB = 1024;
    let topics = 0;
    await fc.assert(
      fc.asyncProperty(
        // Sizes in KiB around the bound: several to a page, or one larger than it alone.
        fc.array(fc.integer({ min: 1, max: 5 * KIB }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 100 }),
        async (sizes, limit) => {
          const topic = `large.${++topics}`;
          for (const [i, size] of sizes.entries()) {
            await gateway.publish(topic, `${i}:`.padEnd(size * KIB - 2, 'x'));
          }
          const read: string[] = [];
          let since = 0;
          for (;;) {
            const reply = await raw.request('topic.history', { topic, since, limit });
            const page = reply.result as {
              messages: { seq: number; data: string }[];
              lastSeq: number;
            };
            // The model: from `since`, as many as fit in the bound (the first whatever its
            // size), at most `limit`.
            const left = sizes.slice(since);
            let bytes = 0;
            let fit = 0;
            for (const size of left.slice(0, limit)) {
              const payload = size * KIB; // the JSON string's quotes replace the 2 chars cut
              if (fit > 0 && bytes + payload > MAX_HISTORY_PAGE_BYTES) break;
              bytes += payload;
              fit++;
            }
            expect(page.messages.map((m) => m.seq)).toEqual(
              Array.from({ length: fit }, (_, k) => since + k + 1),
            );
            read.push(...page.messages.map((m) => m.data.slice(0, m.data.indexOf(':'))));
            since = page.messages.at(-1)!.seq;
            if (since >= page.lastSeq) break;
          }
          expect(read).toEqual(sizes.map((_, i) => String(i)));
        },
      ),
      { numRuns: 12 },
    );
  }, 120_000);
});
