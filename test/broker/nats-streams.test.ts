/**
 * What a client can make NATS hold (issue 14, finding 6), on the shared NATS: a subscribe
 * creates no stream (a topic without one still gets every message published after the
 * subscribe), idle streams are deleted, prefixes never share a stream, and new streams are
 * made at most so many per second per node. Also through a gateway: subscribes to any number
 * of names leave nothing on NATS, and the delivery account holds for a subscriber that came
 * before the stream.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TopicCreationLimitError } from '../../src/pubsub/broker.js';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { natsTopicNames } from '../../src/pubsub/nats-names.js';
import { brokerFromEnv } from '../../src/server/broker-from-env.js';
import type { Gateway } from '../../src/server/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { canConnect } from '../support/network.js';
import { startGateway } from '../support/gateway.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const skip = !(await canConnect(4222)) && process.env.CI !== 'true';

/** Every prefix this file uses starts with it; their streams are deleted in afterAll. */
const run = `wsrpch14${randomBytes(4).toString('hex')}`;
let prefixes = 0;
const newPrefix = (): string => `${run}p${++prefixes}`;

const brokers: NatsBroker[] = [];
const gateways: Gateway[] = [];
const sockets: RawRpc[] = [];
let nc: NatsConnection;
let jsm: JetStreamManager;

async function open(prefix: string, options: Parameters<typeof NatsBroker.connect>[0] = {}) {
  const broker = await NatsBroker.connect({
    servers: NATS_URL,
    prefix,
    timeoutMs: 5_000,
    ...options,
  });
  brokers.push(broker);
  return broker;
}

/** Names of the streams under `prefix` (`<prefix>_...`). */
async function streamsOf(prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const name of jsm.streams.names()) if (name.startsWith(`${prefix}_`)) names.push(name);
  return names;
}

async function streamExists(stream: string): Promise<boolean> {
  try {
    await jsm.streams.info(stream);
    return true;
  } catch {
    return false;
  }
}

function collector(): { messages: BrokerMessage[]; deliver: (m: BrokerMessage) => void } {
  const messages: BrokerMessage[] = [];
  return { messages, deliver: (m) => messages.push(m) };
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe.skipIf(skip)('NATS: what a client can make the broker hold', () => {
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    jsm = await jetstreamManager(nc);
  });

  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((s) => s.close()));
    await Promise.all(gateways.splice(0).map((g) => g.close()));
    await Promise.all(brokers.splice(0).map((b) => b.close()));
  });

  afterAll(async () => {
    const ours: string[] = [];
    for await (const name of jsm.streams.names()) if (name.startsWith(run)) ours.push(name);
    await Promise.all(ours.map((name) => jsm.streams.delete(name).catch(() => false)));
    await nc.close();
  });

  it('a subscribe creates no stream; the first publish does, and the subscriber gets every message from seq 1', async () => {
    const prefix = newPrefix();
    const subscriberNode = await open(prefix);
    const publisherNode = await open(prefix);
    const topic = 'prices.never-published';
    const seen = collector();
    await subscriberNode.subscribe(topic, seen.deliver);
    expect(await streamsOf(prefix)).toEqual([]);
    expect(await subscriberNode.history(topic, 0)).toEqual({ messages: [], lastSeq: 0 });
    expect(await streamsOf(prefix)).toEqual([]);

    // A burst, as a gateway publishes one: all of it reaches the subscriber, in order, once.
    const seqs = await Promise.all(
      range(1, 20).map((i) => publisherNode.publish(topic, String(i))),
    );
    expect(seqs).toEqual(range(1, 20));
    await waitUntil(() => seen.messages.length >= 20, 'the 20 messages');
    expect(seen.messages.map((m) => m.seq)).toEqual(range(1, 20));
    expect(seen.messages.map((m) => m.payload)).toEqual(range(1, 20).map(String));
    const { epoch } = await publisherNode.history(topic, 0);
    expect(seen.messages.every((m) => m.epoch === epoch)).toBe(true);
    expect(await streamsOf(prefix)).toEqual([natsTopicNames(prefix, topic).stream]);
  });

  it('subscribes to 300 names under a prefix topic leave no stream behind', async () => {
    const prefix = newPrefix();
    const broker = await open(prefix);
    const topics = range(1, 300).map((i) => `priv.user${i}.${randomBytes(4).toString('hex')}`);
    await Promise.all(topics.map((topic) => broker.subscribe(topic, () => undefined)));
    expect(await streamsOf(prefix)).toEqual([]);
    await Promise.all(topics.map((topic) => broker.unsubscribe(topic)));
    expect(await streamsOf(prefix)).toEqual([]);
  });

  it('the last unsubscribe deletes an idle stream (nothing retained, no consumer), not one still in use', async () => {
    const prefix = newPrefix();
    const a = await open(prefix);
    const b = await open(prefix);
    const topic = 'room.short-lived';
    const { stream } = natsTopicNames(prefix, topic);
    await a.subscribe(topic, () => undefined);
    await b.subscribe(topic, () => undefined);
    await a.publish(topic, '"gone soon"', { maxLength: 10, maxAgeMs: 300 });
    await waitUntil(async () => (await jsm.streams.info(stream)).state.messages === 0, 'expiry');

    await a.unsubscribe(topic); // b still consumes it
    expect(await streamExists(stream)).toBe(true);
    await b.unsubscribe(topic);
    expect(await streamExists(stream)).toBe(false);

    // Published to again: a new stream (a new epoch), numbered from 1.
    const seen = collector();
    await b.subscribe(topic, seen.deliver);
    expect(await a.publish(topic, '"again"')).toBe(1);
    await waitUntil(() => seen.messages.length >= 1, 'the message on the new stream');
    expect(seen.messages.map((m) => m.seq)).toEqual([1]);
  });

  it('a stream that still retains messages stays; the sweep deletes it once they expired', async () => {
    const prefix = newPrefix();
    const a = await open(prefix, { idleStreamSweepMs: 0 });
    const kept = 'room.kept';
    const expiring = 'room.expiring';
    await a.publish(kept, '"kept"');
    await a.publish(expiring, '"expiring"', { maxLength: 10, maxAgeMs: 300 });
    await a.subscribe(expiring, () => undefined);
    await a.unsubscribe(expiring); // not idle yet: its message is retained
    expect((await streamsOf(prefix)).sort()).toEqual(
      [natsTopicNames(prefix, kept).stream, natsTopicNames(prefix, expiring).stream].sort(),
    );
    await waitUntil(
      async () =>
        (await jsm.streams.info(natsTopicNames(prefix, expiring).stream)).state.messages === 0,
      'expiry',
    );
    expect(await a.sweepIdleStreams()).toBe(1);
    expect(await streamsOf(prefix)).toEqual([natsTopicNames(prefix, kept).stream]);
    // A publisher that still takes the deleted stream for set up makes it again.
    expect(await a.publish(expiring, '"back"')).toBe(1);
  });

  it('historyStorage picks the storage of the streams the broker makes; one made already keeps its own', async () => {
    const prefix = newPrefix();
    const onFile = await open(prefix);
    const inMemory = await open(prefix, { historyStorage: 'memory' });
    const storageOf = async (topic: string) =>
      (await jsm.streams.info(natsTopicNames(prefix, topic).stream)).config.storage;
    expect(await onFile.publish('made.on-file', '1')).toBe(1);
    expect(await inMemory.publish('made.in-memory', '1')).toBe(1);
    expect(await storageOf('made.on-file')).toBe('file');
    expect(await storageOf('made.in-memory')).toBe('memory');
    // Each publishes to the other's stream, with other limits too (the stream is updated):
    // the numbering goes on, and the storage a stream was made with stays.
    expect(await inMemory.publish('made.on-file', '2', { maxLength: 5, maxAgeMs: 60_000 })).toBe(2);
    expect(await onFile.publish('made.in-memory', '2', { maxLength: 5, maxAgeMs: 60_000 })).toBe(2);
    expect(await storageOf('made.on-file')).toBe('file');
    expect(await storageOf('made.in-memory')).toBe('memory');
    const history = await inMemory.history('made.in-memory', 0);
    expect(history.messages.map((m) => [m.seq, m.payload])).toEqual([
      [1, '1'],
      [2, '2'],
    ]);
    await expect(
      NatsBroker.connect({ servers: NATS_URL, prefix, historyStorage: 'disk' as 'file' }),
    ).rejects.toThrow('NATS broker historyStorage must be "file" or "memory", got "disk"');
  });

  it('brokerFromEnv takes NATS_HISTORY_STORAGE (as npm start and the config file do)', async () => {
    const prefix = newPrefix();
    const env = { BROKER: 'nats', NATS_URL, BROKER_PREFIX: prefix };
    const broker = (await brokerFromEnv({ ...env, NATS_HISTORY_STORAGE: 'memory' })) as NatsBroker;
    brokers.push(broker);
    expect(await broker.publish('from.env', '1')).toBe(1);
    const { stream } = natsTopicNames(prefix, 'from.env');
    expect((await jsm.streams.info(stream)).config.storage).toBe('memory');
    await expect(brokerFromEnv({ ...env, NATS_HISTORY_STORAGE: 'ram' })).rejects.toThrow(
      'NATS_HISTORY_STORAGE must be file or memory, not "ram"',
    );
  });

  it('two prefixes never share a stream, even when one is the other plus "_"', async () => {
    const short = newPrefix();
    const long = `${short}_b`;
    const a = await open(short);
    const b = await open(long);
    // Before the fix both were the stream `<short>_b_2Ex`.
    expect(natsTopicNames(short, 'b.x').stream).not.toBe(natsTopicNames(long, '2Ex').stream);
    expect(await a.publish('b.x', '"short"')).toBe(1);
    expect(await b.publish('2Ex', '"long"')).toBe(1);
    expect((await a.history('b.x', 0)).messages.map((m) => m.payload)).toEqual(['"short"']);
    expect((await b.history('2Ex', 0)).messages.map((m) => m.payload)).toEqual(['"long"']);
    // The short prefix's sweep never touches the long prefix's streams.
    expect(await a.sweepIdleStreams()).toBe(0);
    expect(await streamExists(natsTopicNames(long, '2Ex').stream)).toBe(true);
  });

  it('makes at most newTopicsBurst streams at once (then newTopicsPerSecond); existing ones stay open', async () => {
    const prefix = newPrefix();
    const broker = await open(prefix, { newTopicsPerSecond: 0.001, newTopicsBurst: 3 });
    for (const i of range(1, 3)) expect(await broker.publish(`t.${i}`, '1')).toBe(1);
    await expect(broker.publish('t.4', '1')).rejects.toBeInstanceOf(TopicCreationLimitError);
    expect(await streamsOf(prefix)).toHaveLength(3);
    // Publishing to the topics that exist is not limited.
    for (const i of range(1, 3)) expect(await broker.publish(`t.${i}`, '2')).toBe(2);
    // Another node sees the existing ones as existing, within its own budget.
    const other = await open(prefix, { newTopicsPerSecond: 0.001, newTopicsBurst: 1 });
    for (const i of range(1, 3)) expect(await other.publish(`t.${i}`, '3')).toBe(3);
  });

  it('a node past its budget of new streams sets up an existing one with its limits without updating it', async () => {
    const prefix = newPrefix();
    const first = await open(prefix);
    expect(await first.publish('t.1', '1')).toBe(1);
    const other = await open(prefix, { newTopicsPerSecond: 0.001, newTopicsBurst: 1 });
    expect(await other.publish('t.2', '1')).toBe(1); // its one new stream
    // An update writes back every setting it read: racing the parking of an idle stream, it
    // would take the stream out of it. None when the limits are those asked for.
    const streams = (other as unknown as { link: { jsm: JetStreamManager } }).link.jsm.streams;
    const update = streams.update.bind(streams);
    let updates = 0;
    streams.update = (...args: Parameters<typeof update>) => {
      updates++;
      return update(...args);
    };
    expect(await other.publish('t.1', '2')).toBe(2);
    expect(updates).toBe(0);
  });

  describe('through a gateway', () => {
    it('a client subscribing to many names leaves no stream; the per-connection rate of new topics applies', async () => {
      const prefix = newPrefix();
      const broker = await open(prefix);
      const { gateway, url } = await startGateway({
        broker,
        limits: { newTopicSubscribesPerSecond: 0.001, newTopicSubscribesBurst: 50 },
      });
      gateways.push(gateway);
      gateway.topic('prices.*');
      const raw = await RawRpc.open(url);
      sockets.push(raw);
      const replies = await Promise.all(
        range(1, 60).map((i) => raw.request('subscribe', [`prices.${i}`])),
      );
      expect(replies.filter((r) => typeof r.result === 'string')).toHaveLength(50);
      const refused = replies.filter((r) => r.error);
      expect(refused).toHaveLength(10);
      expect(refused.every((r) => r.error!.code === -32003)).toBe(true);
      expect(await streamsOf(prefix)).toEqual([]);
      // Topics this node holds already cost nothing: a second connection takes them freely.
      const other = await RawRpc.open(url);
      sockets.push(other);
      const again = await Promise.all(
        range(1, 50).map((i) => other.request('subscribe', [`prices.${i}`])),
      );
      expect(again.every((r) => typeof r.result === 'string')).toBe(true);
      expect(await streamsOf(prefix)).toEqual([]);
    });

    it('a subscriber that came before the stream gets its position, then every message once, in order', async () => {
      const prefix = newPrefix();
      const subscriberNode = await open(prefix);
      const publisherNode = await open(prefix);
      const { gateway, url } = await startGateway({ broker: subscriberNode });
      gateways.push(gateway);
      gateway.topic('feed.*');
      const topic = 'feed.fresh';
      const raw = await RawRpc.open(url);
      sockets.push(raw);
      const reply = await raw.request('subscribe', [topic, null, { position: true }]);
      const id = reply.result as string;
      await raw.until(() => raw.notifications(id).length >= 1, 'the position');
      expect(raw.notifications(id)[0]).toEqual({ subscription: id, seq: 0 });
      expect(await streamsOf(prefix)).toEqual([]);

      const seqs = await Promise.all(
        range(1, 30).map((i) => publisherNode.publish(topic, JSON.stringify(i))),
      );
      expect(seqs).toEqual(range(1, 30));
      await raw.until(
        () => raw.notifications(id).some((n) => n.seq === 30 && 'result' in n),
        'the 30th message',
      );
      const { epoch } = await publisherNode.history(topic, 0);
      const frames = raw.notifications(id).slice(1);
      // Told the epoch (the position had none: no stream yet), then 1..30.
      expect(frames[0]).toEqual({ subscription: id, epoch });
      expect(frames.slice(1)).toEqual(
        range(1, 30).map((i) => ({ subscription: id, seq: i, result: i })),
      );
    });
  });
});
