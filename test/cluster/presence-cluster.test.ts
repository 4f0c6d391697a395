/**
 * Presence across three gateways sharing Redis (in this process, each with its own broker
 * connection): every node sees the same count and members; joins on one node reach the others'
 * events, coalesced and bounded under a burst; a node that stops renewing its lease (its broker
 * link cut, as a dead node's would be) has its members removed by the others within twice the
 * lease.
 */
import { nanoid } from 'nanoid';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { PresenceEvent } from '../../src/server/presence-window.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { startGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';

const LEASE_MS = 600;
const cleanups: (() => unknown)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function cluster(size: number) {
  const prefix = `presence-cluster-${nanoid(6)}`;
  cleanups.push(() => deleteRedisKeys(REDIS_URL, prefix));
  const nodes: { gateway: Gateway<{ user: string }>; url: string; broker: RedisBroker }[] = [];
  for (let i = 0; i < size; i++) {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
    const running = await startGateway<{ user: string }>({
      broker,
      authenticate: ({ query }) => ({ user: query.get('user') ?? 'nobody' }),
      userOf: (context) => context.user,
      presenceLeaseMs: LEASE_MS,
      presenceCoalesceMs: 100,
    });
    running.gateway.topic('room.*', { presence: { maxListed: 50 } });
    cleanups.push(async () => {
      await running.gateway.close();
      await broker.close().catch(() => undefined);
    });
    nodes.push({ gateway: running.gateway, url: running.url, broker });
  }
  return nodes;
}

async function join(url: string, user: string, topic = 'room.1'): Promise<RawRpc> {
  const raw = await RawRpc.open(`${url}?user=${user}`);
  cleanups.push(() => raw.close());
  const reply = await raw.request('subscribe', [topic]);
  expect(typeof reply.result).toBe('string');
  return raw;
}

async function usersSeenFrom(gateway: Gateway<{ user: string }>): Promise<string[]> {
  const users: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await gateway.presence('room.1').members({ cursor, limit: 7 });
    users.push(...page.members.map((m) => m.user!));
    cursor = page.cursor;
  } while (cursor !== undefined);
  return users.sort();
}

describe('presence on three nodes (Redis)', () => {
  it('is the same from every node, and each node hears the others’ joins and leaves', async () => {
    const nodes = await cluster(3);
    const events: PresenceEvent[][] = nodes.map(() => []);
    nodes.forEach(({ gateway }, i) => {
      const watching = gateway.presence('room.1').events$.subscribe((e) => events[i]!.push(e));
      cleanups.push(() => watching.unsubscribe());
    });
    await Promise.all(nodes.map(({ url }, i) => join(url, `u${i}`)));
    const ann = await join(nodes[0]!.url, 'ann');
    for (const { gateway } of nodes) {
      await waitFor(async () => (await gateway.presence('room.1').count()) === 4, 'four members');
      expect(await usersSeenFrom(gateway)).toEqual(['ann', 'u0', 'u1', 'u2']);
    }
    for (const seen of events) {
      await waitFor(() => seen.flatMap((e) => e.joined).length === 4, 'every join, on every node');
    }
    await ann.close();
    for (const seen of events) {
      await waitFor(() => seen.some((e) => e.left.some((m) => m.user === 'ann')), 'ann left');
      expect(seen.at(-1)!.count).toBe(3);
    }
  });

  it('coalesces a burst of joins into few events, each list at most maxListed', async () => {
    const nodes = await cluster(3);
    const events: PresenceEvent[] = [];
    const watching = nodes[2]!.gateway.presence('room.1').events$.subscribe((e) => events.push(e));
    cleanups.push(() => watching.unsubscribe());
    const started = Date.now();
    // 300 joins spread over two nodes, as fast as they come (well over 1 000 a second): 20
    // connections, each subscribed 15 times (each subscription is a member).
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const raw = await join(nodes[i % 2]!.url, `b${i}`);
        await Promise.all(Array.from({ length: 14 }, () => raw.request('subscribe', ['room.1'])));
      }),
    );
    const took = Date.now() - started;
    await waitFor(() => events.at(-1)?.count === 300, 'the count of 300 in an event');
    const listed = events.reduce((n, e) => n + e.joined.length + (e.truncated ?? 0), 0);
    expect(listed).toBe(300);
    for (const event of events) expect(event.joined.length).toBeLessThanOrEqual(50);
    // At most one event a window (100 ms), plus the one after the burst.
    expect(events.length).toBeLessThanOrEqual(Math.ceil(took / 100) + 2);
  });

  it('removes the members of a node that stops renewing within twice the lease', async () => {
    const nodes = await cluster(3);
    await join(nodes[0]!.url, 'stays');
    await join(nodes[2]!.url, 'dies-1');
    await join(nodes[2]!.url, 'dies-2');
    const room = nodes[0]!.gateway.presence('room.1');
    await waitFor(async () => (await room.count()) === 3, 'three members');
    const left: string[] = [];
    const watching = nodes[1]!.gateway
      .presence('room.1')
      .events$.subscribe((e) => left.push(...e.left.map((m) => m.user!)));
    cleanups.push(() => watching.unsubscribe());
    // Its broker link gone: no renewal, no goodbye, as after a SIGKILL.
    const cut = Date.now();
    await nodes[2]!.broker.close();
    await waitFor(async () => (await room.count()) === 1, 'the dead node’s members gone', 5_000);
    expect(Date.now() - cut).toBeLessThan(2 * LEASE_MS + 300);
    expect(await usersSeenFrom(nodes[1]!.gateway)).toEqual(['stays']);
    await waitFor(() => left.length === 2, 'their leave events');
    expect(left.sort()).toEqual(['dies-1', 'dies-2']);
  });
});
