/**
 * A node that drains tells every other node that each of its presence members left: a drain
 * closes all its sessions at once, so their leaves queue behind the first one's write, and the
 * node's close removes them from the store with the rest. Two gateways in this process share
 * real Redis, then real NATS (each with its own broker connection): node A holds members and
 * drains, node C watches (`gateway.presence(topic).events$` and a client's `presence(topic)`),
 * and C's view must end as the store: every join it heard matched by a leave.
 */
import fc from 'fast-check';
import { nanoid } from 'nanoid';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { PresenceState } from '../../src/client/index.js';
import type { Gateway } from '../../src/server/gateway.js';
import { REDIS_URL, deleteNatsStreams, deleteRedisKeys, brokersUp } from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import { connectClient } from '../support/gateway.js';
import type { RawRpc } from '../support/raw-rpc.js';
import {
  presenceMember,
  presenceNode,
  storedMembers,
  subscribeTo,
} from '../support/presence-nodes.js';
import { settle, waitFor } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
/** How long C's view is given to catch up with the store (events come every 50 ms). */
const CATCH_UP_MS = 3_000;

const cleanups: (() => unknown)[] = [];
const prefixes: { kind: BrokerKind; prefix: string }[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  for (const { kind, prefix } of prefixes) {
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix);
    else await deleteNatsStreams(prefix);
  }
});

/**
 * What `gateway`'s events of `topic` tell, from this call on: each session's members, joins counted
 * up and leaves down (a leave of a member never heard of shows as a negative count).
 */
function heardBy(gateway: Gateway, topic: string): Map<string, number> {
  const heard = new Map<string, number>();
  const add = (sessionId: string, by: number): void => {
    const n = (heard.get(sessionId) ?? 0) + by;
    if (n === 0) heard.delete(sessionId);
    else heard.set(sessionId, n);
  };
  const watching = gateway.presence(topic).events$.subscribe((event) => {
    for (const member of event.joined) add(member.sessionId, 1);
    for (const member of event.left) add(member.sessionId, -1);
  });
  cleanups.push(() => watching.unsubscribe());
  return heard;
}

/** The store's members of `topic`, as `heardBy` counts them. */
async function stored(gateway: Gateway, topic: string): Promise<Map<string, number>> {
  const members = new Map<string, number>();
  for (const m of await storedMembers(gateway, topic)) {
    members.set(m.sessionId, (members.get(m.sessionId) ?? 0) + 1);
  }
  return members;
}

const sorted = (counts: Map<string, number>): [string, number][] =>
  [...counts].sort(([a], [b]) => a.localeCompare(b));

const node = (kind: BrokerKind, prefix: string) => presenceNode(kind, prefix, cleanups);
const member = (url: string, topic: string) => presenceMember(url, topic, cleanups);

/** A session's id as the store names it: the one member of `topic` not in `known`. */
async function sessionOf(gateway: Gateway, topic: string, known: ReadonlySet<string>) {
  let found: string | undefined;
  await waitFor(async () => {
    const fresh = [...(await stored(gateway, topic)).keys()].filter((id) => !known.has(id));
    found = fresh.length === 1 ? fresh[0] : undefined;
    return found !== undefined;
  }, 'the new member in the store');
  return found!;
}

for (const kind of ['redis', 'nats'] as const) {
  describe.skipIf(!up[kind] && !mustRun)(`a drained node's presence (${kind})`, () => {
    const prefix = `presence-drain-${nanoid(6)}`;
    prefixes.push({ kind, prefix });

    it('leaves no member of it on another node, in events$ and in a client’s list', async () => {
      const topic = 'room.1';
      const a = await node(kind, prefix);
      const c = await node(kind, prefix);
      const heard = heardBy(c.gateway, topic);
      const client = connectClient(c.url, { reconnect: false });
      cleanups.push(() => client.close());
      let state: PresenceState | undefined;
      const listing = client.presence(topic).subscribe({ next: (s) => (state = s) });
      cleanups.push(() => listing.unsubscribe());

      // One member on C that stays, heard by C's watch (which is then surely listening).
      await member(c.url, topic);
      const stays = await sessionOf(c.gateway, topic, new Set());
      await waitFor(() => heard.get(stays) === 1, 'the member on C heard');
      // Six on A: four sessions, one of them subscribed three times.
      const raws: RawRpc[] = [];
      for (let i = 0; i < 4; i++) raws.push((await member(a.url, topic)).raw);
      await subscribeTo(raws[0]!, topic);
      await subscribeTo(raws[0]!, topic);
      await waitFor(async () => (await c.gateway.presence(topic).count()) === 7, 'seven members');
      await waitFor(
        () => [...heard.values()].reduce((n, k) => n + k, 0) === 7,
        'every join heard on C',
      );
      await waitFor(() => state?.members.length === 5, 'five sessions in the client’s list');

      // Its clients do not answer the drain's ping: every session closes at the deadline.
      await a.gateway.drain({ deadlineMs: 200 });
      await waitFor(
        async () => (await c.gateway.presence(topic).count()) === 1,
        'A’s members gone',
      );
      await settle(() => heard.size === 1 && state?.members.length === 1, CATCH_UP_MS);
      expect(sorted(heard)).toEqual([[stays, 1]]);
      expect(state?.members.map((m) => m.sessionId)).toEqual([stays]);
      expect(state?.count).toBe(1);
    }, 30_000);

    it('model: after random joins and leaves and a drain, what C heard is the store', async () => {
      const c = await node(kind, prefix);
      let run = 0;
      /** A session opens (on A or on C), subscribes again, unsubscribes once, or closes. */
      const step = fc.oneof(
        {
          arbitrary: fc.record({
            op: fc.constant('open' as const),
            onA: fc.boolean(),
            pings: fc.boolean(),
          }),
          weight: 2,
        },
        fc.record({ op: fc.constant('subscribe' as const), pick: fc.nat() }),
        fc.record({ op: fc.constant('unsubscribe' as const), pick: fc.nat() }),
        fc.record({ op: fc.constant('close' as const), pick: fc.nat() }),
      );
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 16 }), async (steps) => {
          const topic = `room.${++run}`;
          const a = await node(kind, prefix);
          const heard = heardBy(c.gateway, topic);
          // The watch is listening once it hears a join: a member on C that stays.
          await member(c.url, topic);
          const stays = await sessionOf(c.gateway, topic, new Set());
          await waitFor(() => heard.get(stays) === 1, 'the member on C heard');

          const sessions: { raw: RawRpc; ids: string[] }[] = [];
          for (const s of steps) {
            if (s.op === 'open') {
              const { raw, id } = await member(s.onA ? a.url : c.url, topic);
              if (s.pings) raw.answerPings();
              sessions.push({ raw, ids: [id] });
              continue;
            }
            if (sessions.length === 0) continue;
            const [session] = sessions.splice(s.pick % sessions.length, 1);
            if (s.op === 'close') {
              await session!.raw.close();
              continue;
            }
            sessions.push(session!);
            if (s.op === 'subscribe') session!.ids.push(await subscribeTo(session!.raw, topic));
            else if (session!.ids.length > 0) {
              const id = session!.ids.splice(s.pick % session!.ids.length, 1)[0]!;
              const reply = await session!.raw.request('unsubscribe', [id]);
              expect(reply.error).toBeUndefined();
            }
          }
          const agree = async () =>
            JSON.stringify(sorted(heard)) ===
            JSON.stringify(sorted(await stored(c.gateway, topic)));
          await waitFor(agree, 'C’s events agreeing with the store ahead of the drain');

          await a.gateway.drain({ deadlineMs: 200 });
          await settle(agree, CATCH_UP_MS);
          const store = await stored(c.gateway, topic);
          expect(sorted(heard)).toEqual(sorted(store));
          // Only C's members are left: A's are all gone from the store.
          const onC = [...c.gateway.sessions.keys()];
          for (const id of store.keys()) expect(onC).toContain(id);
        }),
        { numRuns: 10, endOnFailure: true },
      );
    }, 120_000);
  });
}
