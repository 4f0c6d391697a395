/**
 * Presence across three gateways sharing Redis, and sharing NATS (in this process, each with its
 * own broker connection): every node sees the same count and members; joins on one node reach
 * the others' events, coalesced and bounded under a burst. A node whose members must go without
 * a goodbye: one that stops renewing its lease (its broker link cut), and a gateway child
 * process (test/cluster/node.ts) SIGKILLed; either way the other nodes have removed its members
 * within twice the lease (the documented bound, used as the wait's limit). A node that pauses
 * past its lease is reaped by another and writes its members again: a watcher's list holds them
 * whichever of the reaper's leaves and the node's joins reaches it first.
 */
import { rmSync } from 'node:fs';
import { nanoid } from 'nanoid';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import type { PresenceMember } from '../../src/pubsub/presence.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { PresenceEvent } from '../../src/server/presence-window.js';
import {
  NATS_URL,
  REDIS_URL,
  deleteNatsStreams,
  deleteRedisKeys,
  brokersUp,
} from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import { Cluster, buildNodeScript } from '../support/cluster.js';
import { connectClient, startGateway } from '../support/gateway.js';
import { killChild } from '../support/processes.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';

const LEASE_MS = 600;
const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
const cleanups: (() => unknown)[] = [];

let built: { script: string; dir: string } | undefined;
beforeAll(async () => {
  if (up.redis || up.nats || mustRun) built = await buildNodeScript();
}, 60_000);
afterAll(() => {
  if (built) rmSync(built.dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Node {
  gateway: Gateway<{ user: string }>;
  url: string;
  broker: Broker;
}

/** `size` gateways in this process on `kind` under `prefix` (as brokerFromEnv names its keys). */
async function cluster(kind: BrokerKind, size: number, prefix = `presence-${nanoid(6)}`) {
  cleanups.push(() =>
    kind === 'redis' ? deleteRedisKeys(REDIS_URL, prefix) : deleteNatsStreams(prefix),
  );
  const nodes: Node[] = [];
  for (let i = 0; i < size; i++) {
    const broker =
      kind === 'redis'
        ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
        : await NatsBroker.connect({ servers: NATS_URL, prefix });
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

async function membersSeenFrom(gateway: Gateway<{ user: string }>): Promise<PresenceMember[]> {
  const members: PresenceMember[] = [];
  let cursor: string | undefined;
  do {
    const page = await gateway.presence('room.1').members({ cursor, limit: 7 });
    members.push(...page.members);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return members;
}

async function usersSeenFrom(gateway: Gateway<{ user: string }>): Promise<string[]> {
  return (await membersSeenFrom(gateway)).map((m) => m.user ?? '(none)').sort();
}

/** The sessions that left room.1, as `gateway`'s events tell them. */
function leavesSeenBy(gateway: Gateway<{ user: string }>): PresenceMember[] {
  const left: PresenceMember[] = [];
  const watching = gateway.presence('room.1').events$.subscribe((e) => left.push(...e.left));
  cleanups.push(() => watching.unsubscribe());
  return left;
}

/** Wait until `condition` holds, at most until twice the lease after `since`. */
function withinTwoLeases(since: number, condition: () => Promise<boolean>, what: string) {
  return waitFor(
    condition,
    `${what} within 2 × ${LEASE_MS} ms`,
    2 * LEASE_MS - (Date.now() - since),
  );
}

for (const kind of ['redis', 'nats'] as const) {
  describe.skipIf(!up[kind] && !mustRun)(`presence on three nodes (${kind})`, () => {
    it('is the same from every node, and each node hears the others’ joins and leaves', async () => {
      const nodes = await cluster(kind, 3);
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
        await waitFor(
          () => seen.flatMap((e) => e.joined).length === 4,
          'every join, on every node',
        );
      }
      await ann.close();
      for (const seen of events) {
        await waitFor(() => seen.some((e) => e.left.some((m) => m.user === 'ann')), 'ann left');
        expect(seen.at(-1)!.count).toBe(3);
      }
    });

    it('coalesces a burst of joins into few events, each list at most maxListed', async () => {
      const nodes = await cluster(kind, 3);
      const events: PresenceEvent[] = [];
      let lastEventAt = 0;
      const watching = nodes[2]!.gateway.presence('room.1').events$.subscribe((e) => {
        events.push(e);
        lastEventAt = Date.now();
      });
      cleanups.push(() => watching.unsubscribe());
      const started = Date.now();
      // The watch hears joins once the broker has its subscription (a round trip after
      // `subscribe`): the burst starts once it has heard the first one.
      const first = await join(nodes[0]!.url, 'b0');
      await waitFor(() => events.some((e) => e.joined.length > 0), 'the watch hears a join');
      // 300 joins spread over two nodes, as fast as they come (well over 1 000 a second): 20
      // connections, each subscribed 15 times (each subscription is a member).
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const raw = i === 0 ? first : await join(nodes[i % 2]!.url, `b${i}`);
          await Promise.all(Array.from({ length: 14 }, () => raw.request('subscribe', ['room.1'])));
        }),
      );
      const listed = () => events.reduce((n, e) => n + e.joined.length + (e.truncated ?? 0), 0);
      // An event's count is read from the store when its window closes: it may already hold
      // joins a node has written and not announced yet (they come in a later event).
      await waitFor(
        () => listed() >= 300 && events.at(-1)?.count === 300,
        () => `300 joins listed (${listed()}) and the count of 300 in an event`,
      );
      expect(listed()).toBe(300);
      for (const event of events) expect(event.joined.length).toBeLessThanOrEqual(50);
      // At most one event a window (100 ms), plus the one after the burst, over the time from
      // the first join to the last event's arrival (a loaded machine only makes it longer).
      expect(events.length).toBeLessThanOrEqual(Math.ceil((lastEventAt - started) / 100) + 2);
    });

    it('removes the members of a node that stops renewing within twice the lease', async () => {
      const nodes = await cluster(kind, 3);
      await join(nodes[0]!.url, 'stays');
      await join(nodes[2]!.url, 'dies-1');
      await join(nodes[2]!.url, 'dies-2');
      const room = nodes[0]!.gateway.presence('room.1');
      await waitFor(async () => (await room.count()) === 3, 'three members');
      const left = leavesSeenBy(nodes[1]!.gateway);
      // Its broker link gone: no renewal, no goodbye, as after a SIGKILL.
      const cut = Date.now();
      await nodes[2]!.broker.close();
      await withinTwoLeases(cut, async () => (await room.count()) === 1, 'its members gone');
      expect(await usersSeenFrom(nodes[1]!.gateway)).toEqual(['stays']);
      await waitFor(() => left.length === 2, 'their leave events');
      expect(left.map((m) => m.user).sort()).toEqual(['dies-1', 'dies-2']);
    });

    it('keeps a paused node’s members in a watcher’s list when the reaper’s leaves come after its joins', async () => {
      const [paused, reaper] = await cluster(kind, 2);
      await join(paused!.url, 'paused');
      const room = reaper!.gateway.presence('room.1');
      await waitFor(async () => (await room.count()) === 1, 'the member written');
      const events: PresenceEvent[] = [];
      const watching = room.events$.subscribe((e) => events.push(e));
      cleanups.push(() => watching.unsubscribe());
      const client = connectClient(`${reaper!.url}?user=watcher`);
      cleanups.push(() => client.close());
      const seen: { count: number; members: { user?: string }[] }[] = [];
      const folding = client.presence('room.1').subscribe((state) => seen.push(state));
      cleanups.push(() => folding.unsubscribe());
      await waitFor(() => seen.at(-1)?.members.length === 1, 'the watcher lists the member');

      // The reaper's announcements of the leaves it reaped are held: they cross the paused
      // node's joins and reach the watcher after them.
      const held: (() => void)[] = [];
      const publish = reaper!.broker.publish.bind(reaper!.broker);
      reaper!.broker.publish = (topic, payload, ...rest) =>
        topic === '$presence.room.1' && payload.includes('"l"')
          ? new Promise<void>((resolve) => held.push(resolve)).then(() =>
              publish(topic, payload, ...rest),
            )
          : publish(topic, payload, ...rest);
      const release = (): void => {
        reaper!.broker.publish = publish;
        for (const resolve of held.splice(0)) resolve();
      };
      cleanups.push(release);
      // Paused: neither its renewal nor its reaping reaches the broker, so its lease lapses and
      // the other node removes its member.
      const store = paused!.broker.presence!;
      const renew = store.renew.bind(store);
      const reap = store.reap.bind(store);
      let pausing = true;
      store.renew = (owner, leaseMs) => (pausing ? Promise.resolve(true) : renew(owner, leaseMs));
      store.reap = () => (pausing ? Promise.resolve([]) : reap());
      await waitFor(() => held.length > 0, 'the reaper removed the paused node’s member');
      const heard = seen.length;
      pausing = false;
      await waitFor(
        () => events.some((e) => e.joined.length > 0) && seen.length > heard,
        'the watcher heard the member written again',
      );
      const before = seen.length;
      release();
      await waitFor(() => seen.length > before, 'the watcher heard the reaper’s leaves');
      expect(await usersSeenFrom(reaper!.gateway)).toEqual(['paused']);
      expect(seen.at(-1)).toMatchObject({ count: 1, members: [{ user: 'paused' }] });
    });

    it('removes the members of a SIGKILLed gateway process within twice the lease', async () => {
      const processes = new Cluster(built!.script, kind);
      cleanups.push(() => processes.cleanup());
      const nodes = await cluster(kind, 2, processes.prefix);
      const child = await processes.node('c', {
        env: { PRESENCE: 'room.*', PRESENCE_LEASE_MS: String(LEASE_MS) },
      });
      await join(nodes[0]!.url, 'stays');
      await join(child.url, 'killed-1');
      await join(child.url, 'killed-2');
      for (const { gateway } of nodes) {
        await waitFor(async () => (await gateway.presence('room.1').count()) === 3, 'three');
      }
      // The child process has no userOf: its members are known by their session ids.
      const doomed = (await membersSeenFrom(nodes[0]!.gateway))
        .filter((m) => m.user === undefined)
        .map((m) => m.sessionId)
        .sort();
      expect(doomed).toHaveLength(2);
      const left = nodes.map(({ gateway }) => leavesSeenBy(gateway));

      const killedAt = Date.now();
      await killChild(child.child);
      expect(child.child.signalCode).toBe('SIGKILL');
      for (const { gateway } of nodes) {
        const room = gateway.presence('room.1');
        await withinTwoLeases(killedAt, async () => (await room.count()) === 1, 'its members gone');
        expect(await usersSeenFrom(gateway)).toEqual(['stays']);
      }
      for (const seen of left) {
        await waitFor(() => seen.length === 2, 'the leave event of both');
        expect(seen.map((m) => m.sessionId).sort()).toEqual(doomed);
      }
    });
  });
}
