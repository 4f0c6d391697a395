/**
 * The `$presence` subscription names a topic the node then holds (its name, and the broker's
 * `$presence.<topic>` channel) for as long as the subscription lives, so it is weighed as a
 * subscribe to that topic is: the name's checks (`maxTopicNameBytes`, well-formed Unicode), the
 * connection's `maxTopicBytesPerConnection` (given back when the subscription ends), and the
 * new-topic rate when this node does not watch the topic's presence yet. Each refusal is the
 * very error a plain subscribe gets. On Redis, a refused name opens no channel.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { REDIS_URL, deleteRedisKeys, withRedis } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';
import { RawRpc } from '../support/raw-rpc.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
const brokers: RedisBroker[] = [];

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

/** A gateway with `room.*` (presence) and `plain.*` (none). */
async function roomGateway(options: GatewayOptions<unknown> = {}): Promise<{ url: string }> {
  const running = await res.gateway(options);
  running.gateway.topic('room.*', { presence: true });
  running.gateway.topic('plain.*');
  return running;
}

async function raw(url: string): Promise<RawRpc> {
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return client;
}

const presence = (client: RawRpc, topic: string): Promise<WireFrame> =>
  client.request('subscribe', ['$presence', { topic }]);

/** The id of an accepted subscribe, once its first message (the count and members) is here. */
async function watching(client: RawRpc, topic: string): Promise<string> {
  const reply = await presence(client, topic);
  if (typeof reply.result !== 'string') throw new Error(`refused: ${JSON.stringify(reply)}`);
  const id = reply.result;
  await client.until(() => client.notifications(id).length > 0, `the first page of ${topic}`);
  return id;
}

describe('$presence: the topic name', () => {
  it('a name longer than maxTopicNameBytes gets the subscribe error, not echoed', async () => {
    const { url } = await roomGateway();
    const client = await raw(url);
    const name = `room.${'x'.repeat(300_000)}`;
    const plain = await client.request('subscribe', [name]);
    expect(plain.error).toEqual({
      code: -32602,
      message: `Topic name too long: ${name.length} bytes (UTF-8), at most 256 (limits.maxTopicNameBytes)`,
      data: { limit: 256, bytes: name.length },
    });
    const reply = await presence(client, name);
    expect(reply.error).toEqual(plain.error);
    expect(JSON.stringify(reply).length).toBeLessThan(300);
    // Checked before the topic is looked up: an unknown long name is not echoed either.
    const unknown = await presence(client, `nope.${'y'.repeat(5_000)}`);
    expect(unknown.error).toMatchObject({ code: -32602, data: { limit: 256, bytes: 5_005 } });
    // The longest name that fits is taken.
    expect(typeof (await presence(client, `room.${'z'.repeat(251)}`)).result).toBe('string');
  });

  it('a lone surrogate gets the subscribe error; its U+FFFD twin is a name of its own', async () => {
    const { url } = await roomGateway();
    const client = await raw(url);
    // Sent as a JSON escape: a lone surrogate is valid JSON text.
    const plain = await client.request('subscribe', ['room.\ud800']);
    expect(plain.error).toEqual({
      code: -32602,
      message: 'Topic name is not well-formed Unicode (a lone surrogate)',
    });
    expect((await presence(client, 'room.\ud800')).error).toEqual(plain.error);
    expect((await client.request('subscribe', ['$presence', ['room.\udc00']])).error).toEqual(
      plain.error,
    );
    expect(typeof (await presence(client, 'room.\ufffd')).result).toBe('string');
  });
});

describe('$presence: maxTopicBytesPerConnection', () => {
  it('counts its name with the topic subscriptions, and gives it back when it ends', async () => {
    const { url } = await roomGateway({ limits: { maxTopicBytesPerConnection: 100 } });
    const client = await raw(url);
    const name = (i: number): string => `room.${String(i).padStart(45, '0')}`; // 50 bytes
    const first = await watching(client, name(1));
    expect(typeof (await client.request('subscribe', [name(2)])).result).toBe('string');
    const refused = {
      code: -32005,
      message:
        'Too many subscriptions: their topic names would take 150 bytes, at most 100 (limits.maxTopicBytesPerConnection)',
      data: { limit: 100, bytes: 150 },
    };
    expect((await presence(client, name(3))).error).toEqual(refused);
    expect((await client.request('subscribe', [name(3)])).error).toEqual(refused);
    // Another connection has its own count.
    const other = await raw(url);
    await watching(other, name(3));

    // Unsubscribed: its bytes come back, and a refused one took none.
    expect((await client.request('unsubscribe', [first])).result).toBe(true);
    await watching(client, name(3));
    expect((await presence(client, name(4))).error).toEqual(refused);
  });
});

describe('$presence: its params', () => {
  it('are kept, as text counted with the name, only for a topic whose authorize a refresh asks again', async () => {
    const running = await res.gateway({ limits: { maxTopicBytesPerConnection: 200 } });
    running.gateway.topic('room.*', { presence: true });
    running.gateway.topic('vip.*', { presence: true, authorize: () => true });
    const client = await raw(running.url);
    const pad = 'x'.repeat(300);
    // Counted: 'vip.a' and the params' text, over the bound.
    const refused = await client.request('subscribe', ['$presence', { topic: 'vip.a', pad }]);
    expect(refused.error).toMatchObject({ code: -32005, data: { limit: 200 } });
    expect((refused.error as { data: { bytes: number } }).data.bytes).toBe(
      Buffer.byteLength('vip.a') + JSON.stringify({ topic: 'vip.a', pad }).length,
    );
    expect(typeof (await presence(client, 'vip.b')).result).toBe('string');
    // Not kept, so not counted: only the name is.
    const taken = await client.request('subscribe', ['$presence', { topic: 'room.a', pad }]);
    expect(typeof taken.result).toBe('string');
  });

  it('of a topic without authorize are not held while the subscription lives (a client cannot make each a MiB)', async () => {
    // No input budget: 4 MB of subscribes read at once rather than over seconds.
    const running = await res.gateway({ limits: { bytesPerSecond: 0 } });
    running.gateway.topic('room.*', { presence: true });
    const client = await raw(running.url);
    const count = 20;
    const padBytes = 200_000;
    const subscribe = async (i: number): Promise<void> => {
      // A string of its own in each frame: the gateway's parse makes one per subscribe.
      const pad = `${i}`.padEnd(padBytes, 'x');
      const reply = await client.request('subscribe', ['$presence', { topic: 'room.a', pad }]);
      expect(typeof reply.result).toBe('string');
    };
    // The topic watched and the code paths run before the heap is read.
    for (let i = 0; i < 3; i++) await subscribe(i);
    client.frames.length = 0;
    fullGc();
    const before = heapUsedButCode();
    for (let i = 0; i < count; i++) await subscribe(i);
    client.frames.length = 0;
    fullGc();
    const grown = heapUsedButCode() - before;
    // Held whole, the pads alone would be count × padBytes (4 MB); a subscription itself holds
    // some KB, whatever its params.
    expect(grown).toBeLessThan((count * padBytes) / 4);
  });
});

describe('$presence: the new-topic rate', () => {
  it('a topic whose presence this node does not watch yet takes from the subscribe rate', async () => {
    // A burst of 3, refilled too slowly to matter while the test runs.
    const { url } = await roomGateway({
      limits: { newTopicSubscribesPerSecond: 0.001, newTopicSubscribesBurst: 3 },
    });
    const client = await raw(url);
    await watching(client, 'room.1');
    await watching(client, 'room.2');
    expect(typeof (await client.request('subscribe', ['plain.1'])).result).toBe('string');
    const refused = (topic: string) => ({
      code: -32003,
      message:
        'Rate limited: this connection subscribes to new topics too fast (limits.newTopicSubscribesPerSecond)',
      data: { topic, limit: 0.001 },
    });
    // The bucket is the one topic subscribes take from: empty for both.
    expect((await presence(client, 'room.3')).error).toEqual(refused('room.3'));
    expect((await client.request('subscribe', ['plain.2'])).error).toEqual(refused('plain.2'));

    // Watched already on this node (another connection's): no new broker channel, no token.
    expect((await presence(client, 'room.1')).result).toEqual(expect.any(String));
    const other = await raw(url);
    await watching(other, 'room.3');
    await watching(client, 'room.3');
  });
});

const redisUp = await canConnect(6379);
const mustRun = process.env['CI'] === 'true';
const prefix = `wsrpc-test-presence-limits:${randomBytes(6).toString('hex')}:`;

afterAll(async () => {
  if (redisUp) await deleteRedisKeys(REDIS_URL, prefix.slice(0, -1));
});

describe.skipIf(!redisUp && !mustRun)('$presence on Redis', () => {
  it('a refused name or rate opens no broker channel; an accepted one does', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { url } = await roomGateway({
      broker,
      limits: { newTopicSubscribesPerSecond: 0.001, newTopicSubscribesBurst: 1 },
    });
    const client = await raw(url);
    const channels = (): Promise<string[]> =>
      withRedis(
        REDIS_URL,
        async (redis) => (await redis.pubsub('CHANNELS', `${prefix}*`)) as string[],
      );
    const presenceChannels = async (): Promise<string[]> =>
      (await channels()).filter((channel) => channel.includes('$presence.'));

    const long = `room.${'x'.repeat(300_000)}`;
    expect((await presence(client, long)).error).toMatchObject({ code: -32602 });
    expect((await presence(client, 'room.\ud800')).error).toMatchObject({ code: -32602 });
    await watching(client, 'room.ok');
    // Refused by the rate: the bucket's one token went to room.ok.
    expect((await presence(client, 'room.later')).error).toMatchObject({ code: -32003 });

    const open = await presenceChannels();
    expect(open).toHaveLength(1);
    expect(open[0]!.endsWith('$presence.room.ok')).toBe(true);
    // Nothing of the refused names reached Redis: not the long one, nor the U+FFFD twin.
    expect((await channels()).every((channel) => channel.length < 1_000)).toBe(true);
  });
});
