/**
 * A node that pauses past its presence lease (a long GC pause, a partition) is reaped by another
 * node, which announces its members' leaves; when it runs again it finds its lease lapsed and
 * writes its members again. The reaper's leaves and the paused node's joins travel from two
 * nodes and can reach a watcher in either order. The promise: a watcher that folds the events by
 * member id as a set (a join adds, a leave removes) ends with exactly the store's members,
 * whatever joins and leaves happen before, during and after the pause, and wherever the
 * reaper's leaves arrive. Two gateways in this process share real Redis, then real NATS: A holds
 * the members and pauses (neither its renewals nor its reaping reach the broker, its writes wait
 * for it to resume, and one may land with its reply lost), B reaps and watches, its
 * announcements of reaped leaves held back until a point the model picks.
 */
import fc from 'fast-check';
import { nanoid } from 'nanoid';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { PresenceEvent } from '../../src/server/presence-window.js';
import { REDIS_URL, deleteNatsStreams, deleteRedisKeys, brokersUp } from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import type { Cleanups, PresenceNode } from '../support/presence-nodes.js';
import {
  presenceMember,
  presenceNode,
  storedMembers,
  subscribeTo,
} from '../support/presence-nodes.js';
import type { RawRpc } from '../support/raw-rpc.js';
import { settle, waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
const LEASE_MS = 600;
/** How long B's view is given to catch up with the store once every change is made. */
const CATCH_UP_MS = 3_000;

/**
 * What a run opened, closed at its end: a node of an earlier run left up would reap the next
 * run's paused node itself, unheld.
 */
const cleanups: Cleanups = [];
const closeAll = async (): Promise<void> => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
};
const prefixes: { kind: BrokerKind; prefix: string }[] = [];
afterEach(closeAll);
afterAll(async () => {
  for (const { kind, prefix } of prefixes) {
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix);
    else await deleteNatsStreams(prefix);
  }
});

/** `gateway`'s events of `topic` folded by member id as a set, and every event heard. */
function listedBy(
  gateway: Gateway,
  topic: string,
  cleanups: Cleanups,
): { ids: Set<string>; events: PresenceEvent[] } {
  const ids = new Set<string>();
  const events: PresenceEvent[] = [];
  const watching = gateway.presence(topic).events$.subscribe((event) => {
    events.push(event);
    for (const member of event.joined) ids.add(member.id);
    for (const member of event.left) ids.delete(member.id);
  });
  cleanups.push(() => watching.unsubscribe());
  return { ids, events };
}

async function storedIds(gateway: Gateway, topic: string): Promise<string[]> {
  return (await storedMembers(gateway, topic)).map((m) => m.id).sort();
}

/** Hold `node`'s announcements of leaves on `topic` until the returned function is called. */
function holdLeaves(
  node: PresenceNode,
  topic: string,
): { held: () => number; release: () => void } {
  const waiting: (() => void)[] = [];
  let released = false;
  const publish = node.broker.publish.bind(node.broker);
  node.broker.publish = (channel, payload, ...rest) =>
    !released && channel === `$presence.${topic}` && payload.includes('"l"')
      ? new Promise<void>((resolve) => waiting.push(resolve)).then(() =>
          publish(channel, payload, ...rest),
        )
      : publish(channel, payload, ...rest);
  return {
    held: () => waiting.length,
    release: () => {
      released = true;
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

/**
 * Pause `node` as a process stopped for a while seems to the broker: its renewals and its
 * reaping do not reach it, and a write it makes waits until it runs again. With `lostReply`, the
 * first write made while paused lands but is reported failed (its reply lost on the way back).
 * Returns the resume.
 */
function pause(node: PresenceNode, lostReply: boolean): () => void {
  const store = node.broker.presence!;
  const renew = store.renew.bind(store);
  const reap = store.reap.bind(store);
  const write = store.write.bind(store);
  let paused = true;
  let lose = lostReply;
  const waiting: (() => void)[] = [];
  store.renew = (owner, leaseMs) => (paused ? Promise.resolve(true) : renew(owner, leaseMs));
  store.reap = () => (paused ? Promise.resolve([]) : reap());
  store.write = (...args) => {
    if (!paused) return write(...args);
    if (lose) {
      lose = false;
      return write(...args).then(() => Promise.reject(new Error('the reply was lost')));
    }
    return new Promise<void>((resolve) => waiting.push(resolve)).then(() => write(...args));
  };
  const resume = (): void => {
    paused = false;
    for (const resolve of waiting.splice(0)) resolve();
  };
  cleanups.push(resume);
  return resume;
}

/** A session on A opens and subscribes, subscribes again, unsubscribes once, or closes. */
const step = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('open' as const) }), weight: 2 },
  fc.record({ op: fc.constant('subscribe' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('unsubscribe' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('close' as const), pick: fc.nat() }),
);
type Step = typeof step extends fc.Arbitrary<infer S> ? S : never;

for (const kind of ['redis', 'nats'] as const) {
  describe.skipIf(!up[kind] && !mustRun)(`a paused node's presence (${kind})`, () => {
    const prefix = `presence-lapse-${nanoid(6)}`;
    prefixes.push({ kind, prefix });

    it('model: joins and leaves around a lapse, the reaper’s leaves arriving anywhere: the watcher lists the store', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            before: fc.array(step, { maxLength: 8 }),
            during: fc.array(step, { maxLength: 3 }),
            after: fc.array(step, { maxLength: 6 }),
            releaseAt: fc.nat(6),
            afterRewrite: fc.boolean(),
            lostReply: fc.boolean(),
          }),
          async (model) => {
            try {
              await lapseRun(kind, prefix, `room.${++run}`, model);
            } finally {
              await closeAll();
            }
          },
        ),
        { numRuns: 8, endOnFailure: true },
      );
    }, 180_000);
  });
}

interface LapseModel {
  before: Step[];
  /** Made while A is paused: their writes wait for it to resume (with `lostReply`, one lands). */
  during: Step[];
  after: Step[];
  releaseAt: number;
  afterRewrite: boolean;
  lostReply: boolean;
}

/**
 * One run: `before` on A, A paused (`during` made meanwhile) until B reaped it (B's leaves
 * held), A resumed, `after` on A with B's leaves released before step `releaseAt` (or at the
 * end), and first, when `afterRewrite`, once B heard A's members written again.
 */
async function lapseRun(
  kind: BrokerKind,
  prefix: string,
  topic: string,
  { before, during, after, releaseAt, afterRewrite, lostReply }: LapseModel,
): Promise<void> {
  const options = { presenceLeaseMs: LEASE_MS };
  const a = await presenceNode(kind, prefix, cleanups, options);
  const b = await presenceNode(kind, prefix, cleanups, options);
  const listed = listedBy(b.gateway, topic, cleanups);
  const sessions: { raw: RawRpc; ids: string[] }[] = [];
  const apply = async (s: Step): Promise<void> => {
    if (s.op === 'open') {
      const { raw, id } = await presenceMember(a.url, topic, cleanups);
      sessions.push({ raw, ids: [id] });
      return;
    }
    if (sessions.length === 0) return;
    const session = sessions[s.pick % sessions.length]!;
    if (s.op === 'close') {
      sessions.splice(sessions.indexOf(session), 1);
      await session.raw.close();
    } else if (s.op === 'subscribe') {
      session.ids.push(await subscribeTo(session.raw, topic));
    } else if (session.ids.length > 0) {
      const id = session.ids.splice(s.pick % session.ids.length, 1)[0]!;
      expect((await session.raw.request('unsubscribe', [id])).error).toBeUndefined();
    }
  };
  const agree = async () =>
    JSON.stringify([...listed.ids].sort()) === JSON.stringify(await storedIds(b.gateway, topic));

  // One member that stays, heard by B (whose watch is then surely listening).
  await presenceMember(a.url, topic, cleanups);
  await waitFor(() => listed.ids.size === 1, 'the first member heard on B');
  for (const s of before) await apply(s);
  await waitFor(agree, 'B agreeing with the store before the pause');

  const leaves = holdLeaves(b, topic);
  const resume = pause(a, lostReply);
  for (const s of during) await apply(s);
  await waitFor(() => leaves.held() > 0, 'B reaped the paused node’s members');
  const heard = listed.events.length;
  resume();
  if (afterRewrite) {
    // The reaper's leaves come after the watcher heard the members written again.
    await waitFor(
      () => listed.events.slice(heard).some((e) => e.joined.length > 0),
      'the members written again heard on B',
    );
  }
  for (let i = 0; i < after.length; i++) {
    if (i === releaseAt) leaves.release();
    await apply(after[i]!);
  }
  leaves.release();
  // Every session open on A ends in the store, once per subscription it holds (A finds its
  // lease lapsed at its next renewal, a third of the lease after it resumed, and writes them).
  const subscriptions = 1 + sessions.reduce((n, s) => n + s.ids.length, 0);
  await waitFor(
    async () => (await storedIds(b.gateway, topic)).length === subscriptions,
    () => `${subscriptions} members in the store`,
  );
  await settle(agree, CATCH_UP_MS);
  expect([...listed.ids].sort()).toEqual(await storedIds(b.gateway, topic));
}
