/**
 * The live messages a resuming subscription holds back while its history is replayed (its
 * backlog, bounded per subscription by the topic's highWaterMark in characters and 10 000
 * messages) are its connection's output: they count toward `maxBufferedBytesTotal` with what its
 * socket has queued. A connection that resumes many topics and does not read (its replays wait
 * for its socket to drain) cannot make the node hold maxSubscriptions x highWaterMark of frames
 * for it past the total: once its socket and backlogs together are among the largest over it,
 * it is closed 1013.
 */
import { randomBytes } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { deleteRedisKeys } from '../support/brokers.js';
import { fullGc, heapUsedButCode } from '../support/heap.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const reachable = await canConnect(6379);
const prefix = `wsrpc-hE-backlog:${randomBytes(6).toString('hex')}:`;

const res = new Resources();
const brokers: RedisBroker[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});
afterAll(async () => {
  if (reachable) await deleteRedisKeys(REDIS_URL, prefix.slice(0, -1));
});

const TOPICS = 50;
const HWM = 64 * 1024;
const TOTAL = 2 * 1024 * 1024;

/** One topic with about 6 MB of history: its replay fills what the socket buffers absorb. */
async function bigHistory(gateway: Gateway<unknown>): Promise<void> {
  const chunk = 'h'.repeat(20_000);
  for (let n = 0; n < 300; n += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, k) => gateway.publish('feed.big', { i: n + k, chunk })),
    );
  }
}

/** Characters held in the replay backlogs of every subscription of the gateway (its internals). */
function backlogChars(pubsub: unknown): { total: number; each: number[] } {
  const tables = (pubsub as { tables: Map<unknown, { subscriptions: Map<string, unknown> }> })
    .tables;
  const each: number[] = [];
  for (const table of tables.values()) {
    for (const subscription of table.subscriptions.values()) {
      const replay = (subscription as { replay?: { waitingChars: number } }).replay;
      each.push(replay?.waitingChars ?? 0);
    }
  }
  return { total: each.reduce((a, b) => a + b, 0), each };
}

describe.runIf(reachable)('replay backlogs (Redis)', () => {
  it('count toward maxBufferedBytesTotal: a connection past it is closed 1013', async () => {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway, url } = await res.gateway({
      broker,
      limits: { maxBufferedBytesTotal: TOTAL },
    });
    gateway.topic('feed.*', { highWaterMark: HWM });
    const topics = Array.from({ length: TOPICS - 1 }, (_, i) => `feed.${i}`);
    await bigHistory(gateway);
    const subscribe = (topic: string) => ({
      jsonrpc: '2.0',
      method: 'subscribe',
      params: [topic, null, { since: 0 }],
      id: raw.nextId(),
    });
    const opened = firstValueFrom(gateway.connected$);
    const raw = await res.rawRpc(url);
    const session = await opened;
    raw.send(subscribe('feed.big'));
    raw.socket.pause(); // reads nothing from here on
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // its replay stalls
    // Resumes of other topics: each waits for the socket to drain before its first read.
    raw.send(topics.map(subscribe));
    await waitUntil(
      () => Object.keys(gateway.pubsub.topics()).length === TOPICS,
      'the subscriptions',
    );
    topics.push('feed.big');

    fullGc();
    const heapBefore = heapUsedButCode();
    // Live messages on every topic while the replays wait: 2 KB each, 40 per topic (80 KB).
    const big = 'y'.repeat(2_000);
    for (let n = 0; n < 40; n++) {
      await Promise.all(topics.map((topic) => gateway.publish(topic, { live: n, big })));
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    fullGc();
    const heapGrown = heapUsedButCode() - heapBefore;
    const { total, each } = backlogChars(gateway.pubsub);
    const open = raw.socket.readyState === raw.socket.OPEN;
    console.log(
      `backlogs: ${total} characters held for one connection (${each.length} subscriptions, ` +
        `largest ${Math.max(...each)}), heap grown ${heapGrown} bytes, ` +
        `maxBufferedBytesTotal ${TOTAL}, connection open: ${open}`,
    );
    // Each backlog is within its topic's highWaterMark, as documented...
    for (const chars of each) expect(chars).toBeLessThanOrEqual(HWM + 2_100);
    // ...and together they are no more than the node-wide total allows: past it, the
    // connection is closed (1013) rather than kept open holding them.
    expect(total > TOTAL && open).toBe(false);
    expect(await within(session.closed, 'the connection to be closed')).toEqual({
      code: 1013,
      reason: 'output over budget',
    });
  }, 120_000);

  it('count toward maxBufferedBytes: a TCP connection not reading them is closed 1008', async () => {
    const MAX_BUFFERED = 256 * 1024;
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix });
    brokers.push(broker);
    const { gateway } = await res.gateway({
      broker,
      heartbeatIntervalMs: 200,
      limits: { maxBufferedBytes: MAX_BUFFERED, maxBufferedBytesTotal: 0 },
    });
    gateway.topic('feed.*', { highWaterMark: HWM });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    await bigHistory(gateway);
    const opened = firstValueFrom(gateway.connected$);
    const socket = netConnect(port, '127.0.0.1');
    res.netSockets.push(socket);
    socket.on('error', () => undefined);
    const session = await opened;
    let id = 0;
    const subscribe = (topic: string) =>
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'subscribe',
        params: [topic, null, { since: 0 }],
        id: ++id,
      }) + '\n';
    socket.write(subscribe('feed.big'));
    socket.pause(); // reads nothing from here on
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // its replay stalls
    // Its socket holds about one page: under the bound, however long it does not read.
    expect(session.transport.bufferedAmount).toBeLessThan(MAX_BUFFERED);
    const topics = Array.from({ length: 19 }, (_, i) => `feed.${i}`);
    socket.write(topics.map(subscribe).join(''));
    await waitUntil(() => Object.keys(gateway.pubsub.topics()).length === 20, 'the subscriptions');
    topics.push('feed.big');
    // Live messages held back by the stalled replays: about 1.3 MB, over 5 x maxBufferedBytes.
    const big = 'y'.repeat(2_000);
    for (let n = 0; n < 40 && !session.isClosed; n++) {
      await Promise.all(topics.map((topic) => gateway.publish(topic, { live: n, big })));
    }
    expect(await within(session.closed, 'the connection to be closed')).toEqual({
      code: 1008,
      reason: 'not reading',
    });
  }, 120_000);
});
