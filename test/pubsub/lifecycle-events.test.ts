import { Subject } from 'rxjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Gateway, LifecycleEvent, UserPresenceChange } from '../../src/index.js';
import { createGateway } from '../../src/index.js';
import { silentLogger } from '../../src/peer/logger.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { LIFECYCLE_TOPIC } from '../../src/server/lifecycle.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

type Ctx = { user?: string };

/** A gateway whose sessions' user is the `user` query parameter, serving the `room.*` topics. */
async function gatewayWithUsers(options: Parameters<typeof res.gateway<Ctx>>[0] = {}) {
  const running = await res.gateway<Ctx>({
    authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
    userOf: (context) => context.user,
    ...options,
  });
  running.gateway.topic('room.*');
  return running;
}

/**
 * In-process nodes: a MemoryBroker serves one node (one listener per topic), so each gateway
 * has its own, and what one publishes on the lifecycle topic reaches every broker still linked.
 */
class LinkedBroker extends MemoryBroker {
  constructor(private readonly ring: Set<LinkedBroker>) {
    super();
    ring.add(this);
  }

  /** Cut from the others (as a node that died): it hears nothing, and nobody hears it. */
  cut(): void {
    this.ring.delete(this);
  }

  override publish(...args: Parameters<MemoryBroker['publish']>): Promise<number> {
    const [topic, payload] = args;
    if (topic !== LIFECYCLE_TOPIC) return super.publish(...args);
    if (!this.ring.has(this)) return Promise.resolve(0);
    for (const broker of this.ring) if (broker !== this) void broker.deliverHere(topic, payload);
    return super.publish(...args);
  }

  private deliverHere(topic: string, payload: string): Promise<number> {
    return super.publish(topic, payload);
  }
}

/** A value a lifecycle Subject carries (an event with its node). */
function isLifecycleEvent(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'type' in value && 'node' in value;
}

function record(gateway: Gateway<Ctx>) {
  const events: LifecycleEvent[] = [];
  const online: UserPresenceChange[] = [];
  const offline: UserPresenceChange[] = [];
  gateway.events$.subscribe((event) => events.push(event));
  gateway.userOnline$.subscribe((change) => online.push(change));
  gateway.userOffline$.subscribe((change) => offline.push(change));
  return { events, online, offline };
}

async function raw(url: string): Promise<RawRpc> {
  const socket = await RawRpc.open(url);
  res.track(socket.socket);
  return socket;
}

describe('lifecycle events on one gateway', () => {
  it('connect, subscribe, unsubscribe and disconnect with the close code and reason, in order', async () => {
    const { gateway, url } = await gatewayWithUsers();
    const seen = record(gateway);
    const client = await raw(`${url}?user=alice`);
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const [sessionId] = [...gateway.sessions.keys()];
    const first = await client.request('subscribe', ['room.a']);
    await client.request('unsubscribe', [first.result]);
    await client.request('subscribe', ['room.b']);
    client.socket.close(4001, 'bye now');
    await waitUntil(() => seen.events.some((e) => e.type === 'disconnect'), 'the disconnect');
    const node = gateway.nodeId;
    expect(seen.events).toEqual([
      { type: 'connect', sessionId, user: 'alice', node },
      { type: 'subscribe', sessionId, topic: 'room.a', node },
      { type: 'unsubscribe', sessionId, topic: 'room.a', node },
      { type: 'subscribe', sessionId, topic: 'room.b', node },
      // Closing ends its subscriptions first.
      { type: 'unsubscribe', sessionId, topic: 'room.b', node },
      { type: 'disconnect', sessionId, user: 'alice', code: 4001, reason: 'bye now', node },
    ]);
  });

  it('makes no event while nobody observes events$, and tells an observer that comes later', async () => {
    const { gateway, url } = await gatewayWithUsers();
    // The gateway's own observers of the Subject behind events$, if any, count as observers.
    const nexts = vi.spyOn(Subject.prototype, 'next');
    const quiet = await raw(`${url}?user=bob`);
    await quiet.request('subscribe', ['room.a']);
    quiet.socket.close(4001, 'bye');
    await waitUntil(() => gateway.sessions.size === 0, 'the first session to close');
    const made = nexts.mock.calls.filter(([value]) => isLifecycleEvent(value));
    nexts.mockRestore();
    expect(made).toEqual([]);
    const seen = record(gateway);
    const client = await raw(`${url}?user=carol`);
    await waitUntil(() => seen.events.length === 1, 'the connect');
    expect(seen.events[0]).toMatchObject({ type: 'connect', user: 'carol' });
    await client.request('subscribe', ['room.b']);
    expect(seen.events.map((event) => event.type)).toEqual(['connect', 'subscribe']);
  });

  it('a server-side close gives its own code and reason; a session without a user has no user', async () => {
    const { gateway, url } = await gatewayWithUsers();
    const seen = record(gateway);
    await raw(url);
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const [session] = [...gateway.sessions.values()];
    session!.close(4403, 'revoked');
    await waitUntil(() => seen.events.length === 2, 'the disconnect');
    expect(seen.events[0]).toEqual({
      type: 'connect',
      sessionId: session!.id,
      node: gateway.nodeId,
    });
    expect(seen.events[1]).toEqual({
      type: 'disconnect',
      sessionId: session!.id,
      code: 4403,
      reason: 'revoked',
      node: gateway.nodeId,
    });
    expect(seen.online).toEqual([]);
  });

  it('a refused subscribe is no event', async () => {
    const { gateway, url } = await gatewayWithUsers();
    const seen = record(gateway);
    const client = await raw(`${url}?user=alice`);
    const refused = await client.request('subscribe', ['nowhere']);
    expect(refused.error?.code).toBe(-32602);
    expect(seen.events.map((e) => e.type)).toEqual(['connect']);
  });

  it('a user is online from its first session and offline after its last', async () => {
    const { gateway, url } = await gatewayWithUsers();
    const seen = record(gateway);
    const one = await raw(`${url}?user=alice`);
    const two = await raw(`${url}?user=alice`);
    await waitUntil(() => gateway.sessions.size === 2, 'both sessions');
    expect(seen.online).toEqual([{ user: 'alice', node: gateway.nodeId }]);
    expect(gateway.isUserOnline('alice')).toBe(true);
    await one.close();
    await waitUntil(() => gateway.sessions.size === 1, 'one closed');
    await waitUntil(
      () => seen.events.filter((e) => e.type === 'disconnect').length === 1,
      'its event',
    );
    expect(seen.offline).toEqual([]);
    await two.close();
    await waitUntil(() => seen.offline.length === 1, 'offline');
    expect(seen.offline).toEqual([{ user: 'alice', node: gateway.nodeId }]);
    expect(gateway.isUserOnline('alice')).toBe(false);
  });
});

describe('lifecycle state on one gateway', () => {
  it('without clusterEvents, keeps nothing of the users that came and went', async () => {
    const { gateway, url } = await gatewayWithUsers();
    for (let i = 0; i < 20; i++) {
      const client = await raw(`${url}?user=user-${i}`);
      await waitUntil(() => gateway.sessions.size === 1, 'the session');
      await client.close();
      await waitUntil(() => gateway.sessions.size === 0, 'its close');
    }
    // What would tell the other nodes of users online or offline: with no other node to tell,
    // it held every user id the node had seen, for the life of the process.
    const lifecycle = (gateway as unknown as { lifecycle: { dirty: Set<string> } }).lifecycle;
    expect(lifecycle.dirty.size).toBe(0);
  });
});

describe('lifecycle events across gateways (clusterEvents, one MemoryBroker)', () => {
  it("each gateway sees the other's events and users; offline only when gone from both", async () => {
    const ring = new Set<LinkedBroker>();
    const clusterEvents = { leaseMs: 3_000, flushMs: 20 };
    const a = await gatewayWithUsers({ broker: new LinkedBroker(ring), clusterEvents });
    const b = await gatewayWithUsers({ broker: new LinkedBroker(ring), clusterEvents });
    const onA = record(a.gateway);
    const onB = record(b.gateway);
    const atA = await raw(`${a.url}?user=alice`);
    const atB = await raw(`${b.url}?user=alice`);
    await atB.request('subscribe', ['room.x']);
    await waitUntil(
      () => onA.events.some((e) => e.type === 'subscribe' && e.node === b.gateway.nodeId),
      "node B's subscribe on node A",
    );
    expect(onA.online).toEqual([{ user: 'alice', node: a.gateway.nodeId }]);
    // Alice is online for B from whichever came first: her session at B, or A's event about
    // her session there (flushed every 20 ms, so it may reach B before she connects to B).
    expect(onB.online).toHaveLength(1);
    expect(onB.online[0]!.user).toBe('alice');
    expect([a.gateway.nodeId, b.gateway.nodeId]).toContain(onB.online[0]!.node);
    await atA.close();
    await waitUntil(
      () => onB.events.some((e) => e.type === 'disconnect' && e.node === a.gateway.nodeId),
      "node A's disconnect on node B",
    );
    expect(onA.offline).toEqual([]);
    expect(onB.offline).toEqual([]);
    expect(a.gateway.isUserOnline('alice')).toBe(true);
    await atB.close();
    await waitUntil(() => onA.offline.length === 1, 'alice offline on node A');
    expect(onA.offline).toEqual([{ user: 'alice', node: b.gateway.nodeId }]);
    await waitUntil(() => onB.offline.length === 1, 'alice offline on node B');
  });

  it("a gateway that starts later learns the others' users; one that closes takes its users offline", async () => {
    const ring = new Set<LinkedBroker>();
    const clusterEvents = { leaseMs: 3_000, flushMs: 20 };
    const a = await gatewayWithUsers({ broker: new LinkedBroker(ring), clusterEvents });
    await raw(`${a.url}?user=bob`);
    await waitUntil(() => a.gateway.sessions.size === 1, 'bob on node A');
    const b = createGateway<Ctx>({
      logger: silentLogger,
      broker: new LinkedBroker(ring),
      clusterEvents,
      authenticate: () => ({}),
      userOf: (context) => context.user,
    });
    res.gateways.push(b);
    const onB = record(b);
    await b.listen(0);
    await waitUntil(() => b.isUserOnline('bob'), 'bob known on node B');
    expect(onB.online).toEqual([{ user: 'bob', node: a.gateway.nodeId }]);
    await a.gateway.close({ timeoutMs: 1_000 });
    await waitUntil(() => onB.offline.length === 1, 'bob offline once node A closed');
  });

  it('a node not heard from for its lease has its users taken offline; back, they are online again', async () => {
    const ring = new Set<LinkedBroker>();
    const clusterEvents = { leaseMs: 600, flushMs: 20 };
    // Node A's heartbeats (one per check of the leases, right after it) and node B's, in order
    // with carol going offline on node A.
    const log: string[] = [];
    class Tapped extends LinkedBroker {
      constructor(private readonly name: string) {
        super(ring);
      }
      override publish(...args: Parameters<MemoryBroker['publish']>): Promise<number> {
        const [topic, payload] = args;
        const heard = ring.has(this); // cut, nobody hears it
        if (
          heard &&
          topic === LIFECYCLE_TOPIC &&
          (JSON.parse(payload) as { k: string }).k === 'h'
        ) {
          log.push(`${this.name} heartbeat`);
        }
        return super.publish(...args);
      }
    }
    const a = await gatewayWithUsers({ broker: new Tapped('A'), clusterEvents });
    const brokerB = new Tapped('B');
    const b = await gatewayWithUsers({ broker: brokerB, clusterEvents });
    const onA = record(a.gateway);
    a.gateway.userOffline$.subscribe(() => log.push('offline'));
    await raw(`${b.url}?user=carol`);
    await waitUntil(() => a.gateway.isUserOnline('carol'), 'carol known on node A');
    const heartbeats = (node: string) =>
      log.filter((entry) => entry === `${node} heartbeat`).length;
    const afterHeartbeats = async (node: string, count: number) => {
      const target = heartbeats(node) + count;
      await waitUntil(() => heartbeats(node) >= target, `${count} heartbeats of node ${node}`);
    };
    // The leases are read on a clock that moves only when the test says (the timers are real):
    // node B last heard at T, its lease ends at T + 600.
    const T = Date.now();
    vi.useFakeTimers({ toFake: ['Date'], now: T });
    try {
      await afterHeartbeats('B', 1);
      brokerB.cut();
      // At the lease's end (T + 600, not past it), checks come and go: carol stays.
      vi.setSystemTime(T + 600);
      await afterHeartbeats('A', 3);
      expect(onA.offline).toEqual([]);
      // Past it: the first check takes carol offline, before the heartbeat that follows it.
      vi.setSystemTime(T + 601);
      log.push('lapsed');
      await waitUntil(() => onA.offline.length === 1, 'carol offline on node A', 5_000);
      await afterHeartbeats('A', 1);
      expect(log.slice(log.lastIndexOf('lapsed') + 1, log.indexOf('offline') + 2)).toEqual([
        'offline',
        'A heartbeat',
      ]);
    } finally {
      vi.useRealTimers();
    }
    expect(onA.offline).toEqual([{ user: 'carol', node: b.gateway.nodeId }]);
    ring.add(brokerB);
    // Its next heartbeat: node A asks for its users and has carol again.
    await waitUntil(() => a.gateway.isUserOnline('carol'), 'carol back on node A', 5_000);
    expect(onA.online.map((c) => c.user)).toEqual(['carol', 'carol']);
  });

  it('refuses an unusable clusterEvents, naming the option and the range', () => {
    expect(() => createGateway({ clusterEvents: { leaseMs: 10 } })).toThrow(
      'clusterEvents.leaseMs must be an integer from 300 to 600000, not 10',
    );
    expect(() => createGateway({ clusterEvents: { flushMs: 2_000, leaseMs: 3_000 } })).toThrow(
      'clusterEvents.flushMs must be at most a third of clusterEvents.leaseMs (1000), not 2000',
    );
    expect(() => createGateway({ clusterEvents: { lease: 1 } as never })).toThrow(
      'clusterEvents.lease is not an option of clusterEvents',
    );
    expect(() => createGateway({ clusterEvents: 'yes' as never })).toThrow(TypeError);
  });
});

describe('what else reaches the lifecycle topic', () => {
  it('a message of no known shape changes no user list and reaches no observer; a good one after it does', async () => {
    const ring = new Set<LinkedBroker>();
    const clusterEvents = { leaseMs: 3_000, flushMs: 20 };
    const a = await gatewayWithUsers({ broker: new LinkedBroker(ring), clusterEvents });
    const seen = record(a.gateway);
    const other = new LinkedBroker(ring);
    const junk: unknown[] = [
      { k: 'd', n: 'x', v: 1, on: 'abc', off: [], e: [] },
      { k: 'd', n: 'x', v: 1, on: [{ a: 1 }], off: [], e: [] },
      { k: 'd', n: 'x', v: 1, on: [], off: [], e: [null, 5, 's'] },
      {
        k: 'd',
        n: 'x',
        v: 1,
        on: [],
        off: [],
        e: [{ type: 'connect', sessionId: 's', deep: [[[]]] }],
      },
      { k: 'd', n: 'x', v: 1, on: [], off: [], e: [{ type: 'subscribe', sessionId: 's' }] },
      { k: 'd', n: 'x', v: '1', on: [], off: [], e: [] },
      { k: 's', n: 'x', v: 1, u: [1, 2] },
      { k: 'h', n: 'x' },
      { k: 'w', n: 'x', of: 7 },
      { k: 'z', n: 'x' },
      [{ k: 'b', n: 'x' }],
    ];
    for (const wire of junk) await other.publish(LIFECYCLE_TOPIC, JSON.stringify(wire));
    const good = {
      k: 'd',
      n: 'x',
      v: 1,
      on: ['zoe'],
      off: [],
      e: [{ type: 'connect', sessionId: 'x-1', user: 'zoe' }],
    };
    await other.publish(LIFECYCLE_TOPIC, JSON.stringify(good));
    await waitUntil(() => seen.events.length === 1, 'the good event');
    expect(seen.events).toEqual([{ type: 'connect', sessionId: 'x-1', user: 'zoe', node: 'x' }]);
    expect(seen.online).toEqual([{ user: 'zoe', node: 'x' }]);
    other.cut();
    await other.close();
  });
});
