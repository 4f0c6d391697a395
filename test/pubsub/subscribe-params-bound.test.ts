/**
 * What a topic subscription keeps of its subscribe's `params`: they are read again only by the
 * topic's `authorize` (a refresh weighs every subscription anew), so a topic without one keeps
 * nothing of them, however large; a topic with one keeps them and counts their JSON bytes with
 * the topic names against `maxTopicBytesPerConnection` (-32005 beyond it, given back when the
 * subscription ends), and its `authorize` gets them again, equal, after a refresh.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fullGc, heapUsedButCode } from '../support/heap.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { token, tokenIdentity } from '../server/identity-tokens.js';
import type { TestContext } from '../server/identity-tokens.js';
import { openRawRpc } from '../server/raw-rpc.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function raw(url: string): Promise<RawRpc> {
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return client;
}

describe('params of a topic without authorize', () => {
  it('are not kept: 40 subscriptions with ~900 KB params each leave the heap as it was', async () => {
    // No input budget: at its 1 MiB/s the 36 MB would take as many seconds to be read.
    const { gateway, url } = await res.gateway({
      limits: { bytesPerSecond: 0, bytesPerSecondPerIp: 0 },
    });
    gateway.topic('open.*');
    const client = await raw(url);
    // Warm up what the first subscribe makes (the topic on the node, the connection's table).
    expect(typeof (await client.request('subscribe', ['open.a'])).result).toBe('string');
    fullGc();
    const before = heapUsedButCode();
    const count = 40;
    for (let i = 0; i < count; i++) {
      const reply = await client.request('subscribe', ['open.a', { blob: 'x'.repeat(900_000) }]);
      expect(typeof reply.result).toBe('string');
    }
    fullGc();
    const grown = heapUsedButCode() - before;
    // Kept, they would take 36 MB; the subscriptions themselves take a few KB.
    expect(grown).toBeLessThan(8 * 1024 * 1024);
    // Not counted against the connection's bytes either: a short name still fits.
    expect(typeof (await client.request('subscribe', ['open.b'])).result).toBe('string');
  }, 60_000);
});

describe('params of a topic with authorize', () => {
  it('count with the topic names against maxTopicBytesPerConnection (-32005), until given back', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxTopicBytesPerConnection: 1000 } });
    gateway.topic('desk.*', { authorize: () => true });
    gateway.topic('open.*');
    const client = await raw(url);
    const params = { note: 'x'.repeat(400) }; // 411 bytes of JSON, with `desk.a` 417
    const first = await client.request('subscribe', ['desk.a', params]);
    expect(typeof first.result).toBe('string');
    expect(typeof (await client.request('subscribe', ['desk.a', params])).result).toBe('string');
    const refused = {
      code: -32005,
      message:
        'Too many subscriptions: their topic names and the params kept for them would take 1251 bytes, at most 1000 (limits.maxTopicBytesPerConnection)',
      data: { limit: 1000, bytes: 1251 },
    };
    expect((await client.request('subscribe', ['desk.a', params])).error).toEqual(refused);
    // The named form carries them the same way.
    expect((await client.request('subscribe', { topic: 'desk.a', params })).error).toEqual(refused);
    // A topic without authorize keeps none: its params are not counted.
    const big = { note: 'y'.repeat(5_000) };
    expect(typeof (await client.request('subscribe', ['open.a', big])).result).toBe('string');
    // Larger than the whole bound on its own: refused on an empty connection too.
    const other = await raw(url);
    expect((await other.request('subscribe', ['desk.b', big])).error).toMatchObject({
      code: -32005,
      data: { limit: 1000, bytes: 5_017 },
    });

    // Unsubscribed: its bytes come back.
    expect((await client.request('unsubscribe', [first.result])).result).toBe(true);
    expect(typeof (await client.request('subscribe', ['desk.a', params])).result).toBe('string');
  });

  it('are what the topic authorize gets again after a refresh', async () => {
    const { gateway, url } = await res.gateway<TestContext>(tokenIdentity());
    const seen: unknown[] = [];
    gateway.topic('desk.*', {
      authorize: ({ params }) => {
        seen.push(params);
        return true;
      },
    });
    const client = await openRawRpc(url, {
      authorization: `Bearer ${token({ user: 'ann', ttl: 60_000 })}`,
    });
    res.track(client.socket);
    const params = { seat: 7, tags: ['a', 'é'], nested: { none: null } };
    expect(typeof (await client.request('subscribe', ['desk.a', params])).result).toBe('string');
    expect(typeof (await client.request('subscribe', ['desk.b'])).result).toBe('string');
    expect(seen).toEqual([params, undefined]);
    const reply = await client.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 120_000 }),
    });
    expect(reply.error).toBeUndefined();
    expect(seen).toHaveLength(4);
    expect(seen.slice(2)).toEqual(expect.arrayContaining([params, undefined]));
  });
});
