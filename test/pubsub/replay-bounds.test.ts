/**
 * What resumes can make a shared Redis do (issue 14, finding 5). Each subscribe with `since`
 * used to read the topic's whole remaining history at once, whether or not its client read
 * what it was sent; now history is read a page at a time, the next page only once the
 * subscriber's socket has drained below its high-water mark, with at most
 * `maxHistoryReadsPerConnection` reads per connection and `maxHistoryReads` per node under
 * way, and identical reads made together done once. The delivery account still holds: a
 * paged replay delivers each retained seq once, in order, then the live messages held back.
 * Real sockets, the shared Redis under a random prefix, a broker wrapper that counts reads.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage, History, Retention } from '../../src/pubsub/broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { MAX_PAGE } from '../../src/server/pubsub-resume.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayLimits } from '../../src/server/options.js';
import { deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { startGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const skip = !(await canConnect(6379)) && process.env['CI'] !== 'true';
const run = `wsrpc-test-replay:${randomBytes(6).toString('hex')}`;

/** Counts the history reads a gateway makes (resume replays; position reads left out), and can hold them back. */
class CountingBroker implements Broker {
  readonly reads: { afterSeq: number; limit: number | undefined }[] = [];
  messagesRead = 0;
  inFlight = 0;
  maxInFlight = 0;
  private gate: Promise<void> | undefined;
  private openGate: (() => void) | undefined;

  constructor(readonly inner: Broker) {}

  get ready(): boolean {
    return this.inner.ready;
  }

  publish(topic: string, payload: string, retention?: Retention): Promise<number> {
    return this.inner.publish(topic, payload, retention);
  }

  subscribe(topic: string, deliver: (message: BrokerMessage) => void): Promise<void> {
    return this.inner.subscribe(topic, deliver);
  }

  unsubscribe(topic: string): Promise<void> {
    return this.inner.unsubscribe(topic);
  }

  async history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    if (afterSeq >= Number.MAX_SAFE_INTEGER) return this.inner.history(topic, afterSeq, limit);
    this.reads.push({ afterSeq, limit });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
      const history = await this.inner.history(topic, afterSeq, limit);
      this.messagesRead += history.messages.length;
      return history;
    } finally {
      this.inFlight--;
    }
  }

  /** Hold every history read back until `release`. */
  hold(): void {
    this.gate ??= new Promise((resolve) => (this.openGate = resolve));
  }

  release(): void {
    this.openGate?.();
    this.gate = undefined;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

const sockets: RawRpc[] = [];
const gateways: Gateway[] = [];
const brokers: Broker[] = [];
let prefixes = 0;

afterEach(async () => {
  for (const raw of sockets) raw.socket.resume();
  await Promise.all(sockets.splice(0).map((raw) => raw.close()));
  await Promise.all(gateways.splice(0).map((gateway) => gateway.close()));
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  if (!skip) await deleteRedisKeys(REDIS_URL, run);
});

async function setup(
  limits: GatewayLimits,
  topic: { history: number; highWaterMark?: number },
): Promise<{ broker: CountingBroker; gateway: Gateway; url: string }> {
  const redis = await RedisBroker.create({ url: REDIS_URL, prefix: `${run}:${++prefixes}:` });
  const broker = new CountingBroker(redis);
  brokers.push(broker);
  const { gateway, url } = await startGateway({ broker, limits });
  gateways.push(gateway);
  gateway.topic('feed', {
    history: { maxLength: topic.history },
    ...(topic.highWaterMark === undefined ? {} : { highWaterMark: topic.highWaterMark }),
  });
  return { broker, gateway, url };
}

async function client(url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  sockets.push(raw);
  return raw;
}

async function publishAll(gateway: Gateway, count: number, size: number): Promise<void> {
  const filler = 'x'.repeat(size);
  for (let i = 1; i <= count; i += 100) {
    const batch = Array.from({ length: Math.min(100, count - i + 1) }, (_, k) =>
      gateway.publish('feed', { i: i + k, filler }),
    );
    await Promise.all(batch);
  }
}

/** Resolves once `broker` has had no history read under way for several checks in a row. */
async function quiet(broker: CountingBroker): Promise<void> {
  let calm = 0;
  await waitUntil(
    () => {
      calm = broker.inFlight === 0 ? calm + 1 : 0;
      return calm >= 5;
    },
    'history reads to stop',
    30_000,
    100,
  );
}

/** Message seqs (with results) received on subscription `id`. */
function seqsOf(raw: RawRpc, id: string): number[] {
  return raw
    .notifications(id)
    .filter((n) => 'result' in n)
    .map((n) => n.seq!);
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe.skipIf(skip)('resume replays against a shared Redis', () => {
  it('clients that do not read cost a bounded number of page reads, a few at a time; nothing more while they do not read', async () => {
    const { broker, gateway, url } = await setup(
      { maxHistoryReadsPerConnection: 2, maxHistoryReads: 3 },
      { history: 2_000 },
    );
    await publishAll(gateway, 2_000, 2_000); // about 4 MB of history
    const connections = await Promise.all(Array.from({ length: 4 }, () => client(url)));
    for (const raw of connections) {
      for (let i = 0; i < 25; i++) {
        raw.send({
          jsonrpc: '2.0',
          method: 'subscribe',
          params: ['feed', null, { since: 0 }],
          id: raw.nextId(),
        });
      }
      raw.socket.pause(); // reads nothing from here on
    }
    await waitUntil(() => gateway.pubsub.topics()['feed'] === 100, 'the 100 subscriptions');
    await quiet(broker);

    // Before: 100 reads of the whole history at once (about 400 MB from Redis).
    expect(broker.maxInFlight).toBeLessThanOrEqual(3);
    for (const read of broker.reads) {
      expect(read.limit).toBeGreaterThanOrEqual(1);
      expect(read.limit).toBeLessThanOrEqual(MAX_PAGE);
    }
    const read = broker.messagesRead;
    // Each connection took what its socket buffers absorb (a few MB) and its high-water mark.
    expect(read).toBeLessThan(4 * 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(broker.messagesRead).toBe(read);
  }, 120_000);

  it('identical resumes made together are one broker read', async () => {
    const { broker, gateway, url } = await setup(
      { maxHistoryReadsPerConnection: 100, maxHistoryReads: 1 },
      { history: 300 },
    );
    await publishAll(gateway, 300, 100);
    broker.hold();
    const connections = await Promise.all(Array.from({ length: 10 }, () => client(url)));
    const ids = await Promise.all(
      connections.map(async (raw) => {
        const replies = await Promise.all(
          range(1, 5).map(() => raw.request('subscribe', ['feed', null, { since: 0 }])),
        );
        return replies.map((reply) => reply.result as string);
      }),
    );
    await waitUntil(() => broker.reads.length >= 1, 'the first read');
    broker.release();
    for (const [c, raw] of connections.entries()) {
      for (const id of ids[c]!) {
        await raw.until(() => seqsOf(raw, id).length >= 300, `all of history on ${id}`, 20_000);
      }
    }
    // The first read, held back, takes the node's one slot; the resumes that came meanwhile
    // share it (those that started before it was sent) or one more. (Before: 50 reads of the
    // whole history.)
    expect(broker.reads.filter((r) => r.afterSeq === 0).length).toBeLessThanOrEqual(2);
    for (const [c, raw] of connections.entries()) {
      for (const id of ids[c]!) expect(seqsOf(raw, id)).toEqual(range(1, 300));
    }
  }, 60_000);

  it('a paged replay delivers each retained seq once, in order, then the live messages held back meanwhile', async () => {
    const { broker, gateway, url } = await setup({}, { history: 1_000, highWaterMark: 16 * 1024 });
    await publishAll(gateway, 600, 1_000);
    const raw = await client(url);
    const other = await client(url);
    const fromStart = (await raw.request('subscribe', ['feed', null, { since: 0 }]))
      .result as string;
    const fromMiddle = (await raw.request('subscribe', ['feed', null, { since: 300 }]))
      .result as string;
    const elsewhere = (await other.request('subscribe', ['feed', null, { since: 0 }]))
      .result as string;
    // Live messages while the replays are under way.
    await publishAll(gateway, 100, 1_000);
    const last = 700;
    await raw.until(() => seqsOf(raw, fromStart).at(-1) === last, 'the replay from 0', 30_000);
    await raw.until(() => seqsOf(raw, fromMiddle).at(-1) === last, 'the replay from 300', 30_000);
    await other.until(() => seqsOf(other, elsewhere).at(-1) === last, 'the other', 30_000);
    expect(seqsOf(raw, fromStart)).toEqual(range(1, last));
    expect(seqsOf(raw, fromMiddle)).toEqual(range(301, last));
    expect(seqsOf(other, elsewhere)).toEqual(range(1, last));
    // Nothing was reported lost or skipped.
    for (const [socket, id] of [
      [raw, fromStart],
      [raw, fromMiddle],
      [other, elsewhere],
    ] as const) {
      expect(socket.notifications(id).filter((n) => 'gap' in n || 'missed' in n)).toEqual([]);
    }
    // Read in pages of about the 16 KiB high-water mark (a first page of 100, then ~16).
    expect(broker.reads.length).toBeGreaterThan(20);
    expect(Math.max(...broker.reads.map((r) => r.limit ?? Infinity))).toBeLessThanOrEqual(100);
  }, 60_000);

  it("history calls from many connections wait for the node's reads (maxHistoryReads), as replays do", async () => {
    const { broker, gateway, url } = await setup(
      { maxHistoryReadsPerConnection: 2, maxHistoryReads: 2 },
      { history: 100 },
    );
    await publishAll(gateway, 20, 10);
    broker.hold();
    const connections = await Promise.all(Array.from({ length: 4 }, () => client(url)));
    // Two calls on each connection (its own bound), each a read of its own (no two alike).
    const answers = connections.flatMap((raw, c) =>
      [0, 1].map((k) => raw.request('topic.history', { topic: 'feed', since: c * 2 + k })),
    );
    const { historyReads } = gateway.pubsub;
    await waitUntil(
      () => broker.inFlight + historyReads.stats.waiting === 8 || broker.inFlight > 2,
      'every read at the broker or waiting for the node',
    );
    expect(broker.inFlight).toBe(2);
    broker.release();
    const pages = await Promise.all(answers);
    expect(pages.map((p) => (p.result as { messages: unknown[] }).messages.length)).toEqual(
      Array.from({ length: 8 }, (_, n) => 20 - n),
    );
    expect(broker.maxInFlight).toBe(2);
  });

  it("a history call cancelled while it waits for the node's read gives its connection slot back", async () => {
    const { broker, gateway, url } = await setup(
      { maxHistoryReadsPerConnection: 1, maxHistoryReads: 1 },
      { history: 100 },
    );
    await publishAll(gateway, 5, 10);
    broker.hold();
    const first = await client(url);
    const second = await client(url);
    const atBroker = first.request('topic.history', { topic: 'feed', since: 0 });
    await waitUntil(() => broker.inFlight === 1, 'the first read at the broker');
    const waitingId = second.nextId();
    second.send({
      jsonrpc: '2.0',
      method: 'topic.history',
      params: { topic: 'feed', since: 1 },
      id: waitingId,
    });
    const { historyReads } = gateway.pubsub;
    await waitUntil(() => historyReads.stats.waiting === 1, 'the second waiting for the node');
    second.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: waitingId } });
    expect((await second.response(waitingId)).error?.code).toBe(-32001);
    // Not sent: nobody waits for it any more.
    await waitUntil(() => historyReads.stats.waiting === 0, 'the cancelled read dropped');
    broker.release();
    expect(((await atBroker).result as { messages: unknown[] }).messages).toHaveLength(5);
    // Its one slot came back: the next call on the same connection is answered.
    const next = await second.request('topic.history', { topic: 'feed', since: 3 });
    expect((next.result as { messages: unknown[] }).messages).toHaveLength(2);
    expect(broker.reads.map((r) => r.afterSeq)).toEqual([0, 3]);
  });
});
