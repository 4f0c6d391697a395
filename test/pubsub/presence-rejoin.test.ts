/**
 * A session that unsubscribes from a presence topic and subscribes to it again is a member again:
 * the new subscription may be given the id the ended one had (the topic's shared id, once free),
 * and its join may be written together with that subscription's leave, so a member is keyed by
 * membership, never by subscription id. Each round here is one batch, subscribe / unsubscribe
 * the oldest / subscribe, sent without waiting for the last, so a write is under way while the
 * next changes queue; the store must end holding exactly the session's live subscriptions, on
 * MemoryBroker, real Redis and real NATS.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { TestBrokers, brokersUp } from '../support/brokers.js';
import { startGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
const brokers = new TestBrokers();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await brokers.closeAll();
});
// The prefixes' keys and streams, the NATS presence bucket's among them.
afterAll(() => brokers.deleteAll());

const ROUNDS = 12;

async function rejoinRounds(broker?: Broker): Promise<void> {
  const { gateway, url } = await startGateway(broker ? { broker } : {});
  cleanups.push(() => gateway.close());
  gateway.topic('room.*', { presence: true });
  // A second session holds the topic, so the first one's subscriptions share its id.
  const other = await RawRpc.open(url);
  cleanups.push(() => other.close());
  expect((await other.request('subscribe', ['room.1'])).error).toBeUndefined();
  const raw = await RawRpc.open(url);
  cleanups.push(() => raw.close());
  const first = await raw.request('subscribe', ['room.1']);
  const live: string[] = [first.result as string];
  let reused = 0;

  for (let round = 0; round < ROUNDS; round++) {
    const ids = [raw.nextId(), raw.nextId(), raw.nextId()];
    const oldest = live.shift()!;
    raw.send([
      { jsonrpc: '2.0', id: ids[0], method: 'subscribe', params: ['room.1'] },
      { jsonrpc: '2.0', id: ids[1], method: 'unsubscribe', params: [oldest] },
      { jsonrpc: '2.0', id: ids[2], method: 'subscribe', params: ['room.1'] },
    ]);
    const reply = () =>
      raw.frames.find(
        (f): f is WireFrame & WireFrame[] => Array.isArray(f) && f.some((r) => r.id === ids[0]),
      );
    await raw.until(() => reply() !== undefined, 'the batch reply');
    const [added, removed, again] = ids.map((id) => reply()!.find((r) => r.id === id));
    expect(removed!.result).toBe(true);
    live.push(added!.result as string, again!.result as string);
    if (added!.result === oldest || again!.result === oldest) reused++;
  }
  // The case this guards: an id given again to a later subscription of the same session.
  expect(reused).toBeGreaterThan(0);

  // A marker: `other` subscribes again. Its join is written after (or with) every change above
  // (one topic's writes go one at a time, in order), so once the store holds it, it holds what
  // the rounds left.
  expect((await other.request('subscribe', ['room.1'])).error).toBeUndefined();
  const bySession = async (): Promise<Map<string, number>> => {
    const counts = new Map<string, number>();
    let cursor: string | undefined;
    do {
      const page = await gateway.presence('room.1').members({ cursor, limit: 1_000 });
      for (const m of page.members) counts.set(m.sessionId, (counts.get(m.sessionId) ?? 0) + 1);
      cursor = page.cursor;
    } while (cursor !== undefined);
    return counts;
  };
  let stored = new Map<string, number>();
  await waitFor(async () => {
    stored = await bySession();
    return [...stored.values()].includes(2);
  }, 'the marker in the store');
  expect([...stored.values()].sort((a, b) => a - b)).toEqual(
    [2, live.length].sort((a, b) => a - b),
  );
  expect(await gateway.presence('room.1').count()).toBe(live.length + 2);
}

describe('a subscription to a presence topic made again after one ended', () => {
  it('is a member (MemoryBroker)', () => rejoinRounds(), 30_000);

  it.skipIf(!up.redis && !mustRun)(
    'is a member (Redis)',
    async () => {
      await rejoinRounds(await brokers.open('redis', brokers.prefix('redis', 'presence-rejoin-')));
    },
    30_000,
  );

  it.skipIf(!up.nats && !mustRun)(
    'is a member (NATS)',
    async () => {
      await rejoinRounds(await brokers.open('nats', brokers.prefix('nats', 'presence-rejoin-')));
    },
    30_000,
  );
});
