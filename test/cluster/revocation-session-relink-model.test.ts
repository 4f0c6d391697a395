/**
 * `revokeSession` against a model, over random sequences of: sessions opening on node A or B,
 * revocations of any session (open, closed, or never opened) made on either node, and node B's
 * broker link cut and restored. Real SessionRouter, Revocations and MemoryBroker records; each
 * node reaches the broker through a link this test can cut (`$`-topic messages to a node cut off
 * are lost, its broker calls reject, its return calls onRelinked). After every step, the open
 * sessions are exactly those never revoked, but for node B's sessions revoked from A while B was
 * cut off, which stay open until B's link is back and then close; every closed session was
 * closed 4403 with the reason of its latest revocation.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Broker, BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { Revocations } from '../../src/server/revocation.js';
import { SessionRouter } from '../../src/server/session-router.js';
import type { Session } from '../../src/server/session.js';
import { fakeSession } from '../support/fake-sessions.js';
import type { FakeSession } from '../support/fake-sessions.js';
import { captureLogger } from '../support/logging.js';
import { within } from '../support/waiting.js';

type NodeId = 'A' | 'B';

/** `$`-topic delivery between the nodes' links, and the revoked-session records of a MemoryBroker. */
class Hub {
  readonly records = new MemoryBroker();
  readonly subscribers = new Map<
    string,
    Set<{ link: NodeLink; deliver: (m: BrokerMessage) => void }>
  >();
}

/** One node's link to the hub: cut, every call rejects and nothing reaches the node. */
class NodeLink {
  linked = true;
  private readonly relinkListeners = new Set<() => void>();

  constructor(private readonly hub: Hub) {}

  get ready(): boolean {
    return this.linked;
  }

  private down(): Promise<never> {
    return Promise.reject(new Error('link down'));
  }

  publish(topic: string, payload: string): Promise<number> {
    if (!this.linked) return this.down();
    for (const { link, deliver } of this.hub.subscribers.get(topic) ?? []) {
      if (link.linked) deliver({ topic, seq: 0, payload });
    }
    return Promise.resolve(0);
  }

  subscribe(topic: string, deliver: (m: BrokerMessage) => void): Promise<void> {
    if (!this.linked) return this.down();
    let set = this.hub.subscribers.get(topic);
    if (!set) this.hub.subscribers.set(topic, (set = new Set()));
    set.add({ link: this, deliver });
    return Promise.resolve();
  }

  unsubscribe(): Promise<void> {
    return Promise.resolve();
  }

  denySession(
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    if (!this.linked) return this.down();
    return this.hub.records.denySession(node, session, revokedAt, forMs, reason);
  }

  deniedSessions(node: string) {
    if (!this.linked) return this.down();
    return this.hub.records.deniedSessions(node);
  }

  onRelinked(listener: () => void): () => void {
    this.relinkListeners.add(listener);
    return () => this.relinkListeners.delete(listener);
  }

  cut(): void {
    this.linked = false;
  }

  restore(): void {
    this.linked = true;
    for (const listener of this.relinkListeners) listener();
  }
}

interface GatewayNode {
  link: NodeLink;
  router: SessionRouter;
  revocations: Revocations<object>;
  sessions: FakeSession<object>[];
  /** Told when a run of `relinked` has finished. */
  rechecked: (() => void) | undefined;
}

async function startNode(hub: Hub, id: NodeId): Promise<GatewayNode> {
  const { logger } = captureLogger();
  const link = new NodeLink(hub);
  const broker = link as unknown as Broker;
  const node = { link, sessions: [] as FakeSession<object>[], rechecked: undefined } as GatewayNode;
  node.router = new SessionRouter(broker, id, {} as never, logger, {
    revoked: (revocation) => node.revocations.closeLocal(revocation),
    relinked: () => node.revocations.recheck().finally(() => node.rechecked?.()),
  });
  node.revocations = new Revocations<object>({
    broker,
    router: node.router,
    nodeId: id,
    logger,
    exposeErrorDetails: false,
    userOf: undefined,
    issuedAtOf: undefined,
    sessions: () => node.sessions as unknown as Session<object>[],
  });
  await node.router.start();
  return node;
}

interface Real {
  nodes: Record<NodeId, GatewayNode>;
}

interface Model {
  /** Every session id opened, by node, in order. */
  opened: Record<NodeId, string[]>;
  /** Open session ids, and the reason each was closed with. */
  open: Set<string>;
  closedWith: Map<string, string>;
  /** Node B's sessions revoked from A while B was cut off: their latest reason. */
  pending: Map<string, string>;
  bLinked: boolean;
  next: number;
  reasons: number;
}

type Command = fc.AsyncCommand<Model, Real>;

const nodeOf = (id: string): NodeId => (id.startsWith('A-') ? 'A' : 'B');

function check(model: Model, real: Real): void {
  const open = Object.values(real.nodes)
    .flatMap((node) => node.sessions)
    .filter((session) => !session.isClosed)
    .map((session) => session.id)
    .sort();
  expect(open).toEqual([...model.open].sort());
  for (const node of Object.values(real.nodes)) {
    for (const session of node.sessions) {
      if (!session.isClosed) continue;
      expect(session.closedWith).toEqual({
        code: 4403,
        reason: model.closedWith.get(session.id),
      });
    }
  }
}

const openCommand = (node: NodeId): Command => ({
  check: () => true,
  run(model, real) {
    const id = `${node}-s${model.next++}`;
    model.opened[node].push(id);
    model.open.add(id);
    real.nodes[node].sessions.push(fakeSession(id, undefined, {}));
    return Promise.resolve();
  },
  toString: () => `open(${node})`,
});

/**
 * Revoke, from `from`, a session of `target`: the `pick`-th opened there (modulo), or one that
 * never opened when there is none.
 */
const revokeCommand = (from: NodeId, target: NodeId, pick: number): Command => ({
  check: () => true,
  async run(model, real) {
    const opened = model.opened[target];
    const id = opened.length === 0 ? `${target}-ghost` : opened[pick % opened.length]!;
    const reason = `reason ${model.reasons++}`;
    const remote = nodeOf(id) !== from;
    const fromLinked = from === 'A' || model.bLinked;
    const call = real.nodes[from].revocations.revokeSession(id, { reason });
    if (remote && !fromLinked) {
      // Node B cut off revoking A's session: the broker took nothing.
      await expect(call).rejects.toMatchObject({ code: -32009 });
      check(model, real);
      return;
    }
    const open = model.open.has(id);
    expect(await call).toBe(remote || open);
    if (open) {
      const reachesNow = !remote || nodeOf(id) === 'A' || model.bLinked;
      if (reachesNow) {
        model.open.delete(id);
        model.closedWith.set(id, reason);
        model.pending.delete(id);
      } else model.pending.set(id, reason);
    }
    check(model, real);
  },
  toString: () => `revoke(${target}[${pick}] from ${from})`,
});

const cutCommand: Command = {
  check: (model) => model.bLinked,
  run(model, real) {
    model.bLinked = false;
    real.nodes.B.link.cut();
    return Promise.resolve();
  },
  toString: () => 'cut B',
};

const restoreCommand: Command = {
  check: (model) => !model.bLinked,
  async run(model, real) {
    model.bLinked = true;
    const node = real.nodes.B;
    const rechecked = new Promise<void>((resolve) => (node.rechecked = resolve));
    node.link.restore();
    await within(rechecked, "B's revocations read again");
    for (const [id, reason] of model.pending) {
      model.open.delete(id);
      model.closedWith.set(id, reason);
    }
    model.pending.clear();
    check(model, real);
  },
  toString: () => 'restore B',
};

const nodeId = fc.constantFrom<NodeId>('A', 'B');
const commands = fc.commands(
  [
    nodeId.map(openCommand),
    fc
      .tuple(nodeId, nodeId, fc.nat({ max: 20 }))
      .map(([from, target, pick]) => revokeCommand(from, target, pick)),
    fc.constant(cutCommand),
    fc.constant(restoreCommand),
  ],
  { size: '+1' },
);

describe('revokeSession while node B is cut off from the broker, against its model', () => {
  it("closes every revoked session, B's once its link is back, and no other", async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const hub = new Hub();
        const real: Real = {
          nodes: { A: await startNode(hub, 'A'), B: await startNode(hub, 'B') },
        };
        const model: Model = {
          opened: { A: [], B: [] },
          open: new Set(),
          closedWith: new Map(),
          pending: new Map(),
          bLinked: true,
          next: 0,
          reasons: 0,
        };
        try {
          await fc.asyncModelRun(() => ({ model, real }), cmds);
          // The end: B's link back, nothing pending.
          if (!model.bLinked) await restoreCommand.run(model, real);
          expect(model.pending.size).toBe(0);
        } finally {
          await real.nodes.A.router.stop();
          await real.nodes.B.router.stop();
          await hub.records.close();
        }
      }),
      { numRuns: 300 },
    );
  });
});
