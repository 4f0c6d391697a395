/**
 * Presence on one node (MemoryBroker): a subscription to a topic declared with `presence` is a
 * member while it lasts; gateway.presence(topic) counts and pages them and emits coalesced
 * join/leave events; the `$presence` subscription is authorized like the topic and sends the
 * count and first page, then the events; the option is checked when the topic is declared.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { PresenceEvent } from '../../src/server/presence-window.js';
import { connectClient, startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';
import type { RpcClient } from '../../src/client/client.js';

interface Ctx {
  user: string;
  rooms: string[];
}

const sockets: RawRpc[] = [];
const clients: RpcClient[] = [];
const cleanups: (() => unknown)[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) void client.close();
  await Promise.all(sockets.splice(0).map((raw) => raw.close()));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function roomGateway(maxListed?: number): Promise<RunningGateway<Ctx>> {
  const running = await startGateway<Ctx>({
    authenticate: ({ query }) => ({
      user: query.get('user') ?? 'nobody',
      rooms: (query.get('rooms') ?? 'room.1').split(','),
    }),
    userOf: (context) => context.user,
    presenceCoalesceMs: 30,
  });
  cleanups.push(() => running.gateway.close());
  running.gateway.topic('room.*', {
    authorize: ({ session, topic }) => session.context.rooms.includes(topic),
    presence: { info: (session) => ({ name: session.context.user.toUpperCase() }), maxListed },
  });
  running.gateway.topic('plain.*');
  return running;
}

async function member(running: RunningGateway<Ctx>, user: string, rooms = 'room.1') {
  const raw = await RawRpc.open(`${running.url}?user=${user}&rooms=${rooms}`);
  sockets.push(raw);
  return raw;
}

/** The states `client.presence('room.1')` of a watcher's client has seen, from its first one on. */
async function watchedByClient(running: RunningGateway<Ctx>) {
  const client = connectClient(`${running.url}?user=watcher&rooms=room.1`);
  clients.push(client);
  const seen: { count: number; members: { user?: string }[] }[] = [];
  const watching = client.presence('room.1').subscribe((state) => seen.push(state));
  cleanups.push(() => watching.unsubscribe());
  await waitFor(() => seen.length > 0, 'the first state');
  return seen;
}

describe('presence on one node', () => {
  it('counts each subscription as a member, with its user and info, until it ends', async () => {
    const running = await roomGateway();
    const room = running.gateway.presence('room.1');
    expect(await room.count()).toBe(0);
    const ann = await member(running, 'ann');
    const bob = await member(running, 'bob');
    const annSub = (await ann.request('subscribe', ['room.1'])).result as string;
    await bob.request('subscribe', ['room.1']);
    await waitFor(async () => (await room.count()) === 2, 'two members');
    const { members, cursor } = await room.members();
    expect(cursor).toBeUndefined();
    expect(members.map((m) => [m.user, m.info]).sort()).toEqual([
      ['ann', { name: 'ANN' }],
      ['bob', { name: 'BOB' }],
    ]);
    expect(members.every((m) => typeof m.sessionId === 'string')).toBe(true);

    expect((await ann.request('unsubscribe', [annSub])).result).toBe(true);
    await waitFor(async () => (await room.count()) === 1, 'ann gone after unsubscribe');
    await bob.close();
    await waitFor(async () => (await room.count()) === 0, 'bob gone after disconnect');
    // A topic without presence makes no member and has no handle.
    await ann.request('subscribe', ['plain.x']);
    expect(() => running.gateway.presence('plain.x')).toThrow(/has no presence/);
  });

  it('pages the member list with a cursor, every member once', async () => {
    const running = await roomGateway();
    const raws = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((u) => member(running, u)));
    await Promise.all(raws.map((raw) => raw.request('subscribe', ['room.1'])));
    const room = running.gateway.presence('room.1');
    await waitFor(async () => (await room.count()) === 5, 'five members');
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await room.members({ cursor, limit: 2 });
      expect(page.members.length).toBeLessThanOrEqual(2);
      seen.push(...page.members.map((m) => m.user!));
      cursor = page.cursor;
      pages++;
    } while (cursor !== undefined);
    expect(pages).toBe(3);
    expect(seen.sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    await expect(room.members({ limit: 1001 })).rejects.toThrow(
      'limit must be an integer from 1 to 1000, not 1001',
    );
  });

  it('emits joins and leaves coalesced, a leave cancelling a join in the same window', async () => {
    const running = await roomGateway();
    const events: PresenceEvent[] = [];
    const watching = running.gateway.presence('room.1').events$.subscribe((e) => events.push(e));
    cleanups.push(() => watching.unsubscribe());
    const ann = await member(running, 'ann');
    const bob = await member(running, 'bob');
    await ann.request('subscribe', ['room.1']);
    const bobSub = (await bob.request('subscribe', ['room.1'])).result as string;
    await bob.request('unsubscribe', [bobSub]);
    await waitFor(() => events.length > 0, 'an event');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const joined = events.flatMap((e) => e.joined.map((m) => m.user));
    const left = events.flatMap((e) => e.left.map((m) => m.user));
    // Bob came and went within one window: not reported at all (or, split over two, both).
    expect(joined.filter((u) => u === 'ann')).toEqual(['ann']);
    expect(joined.filter((u) => u === 'bob').length).toBe(left.filter((u) => u === 'bob').length);
    expect(events.at(-1)!.count).toBe(1);
  });

  it('bounds an event’s lists at maxListed and counts the rest in truncated', async () => {
    const running = await roomGateway(2);
    const events: PresenceEvent[] = [];
    const watching = running.gateway.presence('room.1').events$.subscribe((e) => events.push(e));
    cleanups.push(() => watching.unsubscribe());
    const raws = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((u) => member(running, u)));
    await Promise.all(raws.map((raw) => raw.request('subscribe', ['room.1'])));
    await waitFor(() => events.at(-1)?.count === 5, 'the count of five');
    for (const event of events) expect(event.joined.length).toBeLessThanOrEqual(2);
    const listed = events.reduce((n, e) => n + e.joined.length + (e.truncated ?? 0), 0);
    expect(listed).toBe(5);
    expect(events.some((e) => (e.truncated ?? 0) > 0)).toBe(true);
  });

  it('serves $presence authorized like the topic: first the count and members, then events', async () => {
    const running = await roomGateway();
    const ann = await member(running, 'ann');
    await ann.request('subscribe', ['room.1']);
    const watcher = await member(running, 'watcher');
    const reply = await watcher.request('subscribe', ['$presence', { topic: 'room.1' }]);
    const id = reply.result as string;
    expect(typeof id).toBe('string');
    await watcher.until(() => watcher.notifications(id).length >= 1, 'the first page');
    expect(watcher.notifications(id)[0]!.result).toEqual({
      count: 1,
      members: [
        {
          id: expect.any(String) as string,
          sessionId: expect.any(String) as string,
          user: 'ann',
          info: { name: 'ANN' },
        },
      ],
    });
    const bob = await member(running, 'bob');
    await bob.request('subscribe', ['room.1']);
    await watcher.until(() => watcher.notifications(id).length >= 2, 'a join event');
    expect(watcher.notifications(id)[1]!.result).toEqual({
      joined: [
        {
          id: expect.any(String) as string,
          sessionId: expect.any(String) as string,
          user: 'bob',
          info: { name: 'BOB' },
        },
      ],
      left: [],
      count: 2,
    });

    // Not allowed the topic: -32004, as a subscribe to it would be.
    const outsider = await member(running, 'eve', 'room.2');
    const refused = await outsider.request('subscribe', ['$presence', { topic: 'room.1' }]);
    expect(refused.error).toMatchObject({ code: -32004, data: { topic: 'room.1' } });
    const plain = await outsider.request('subscribe', ['$presence', { topic: 'plain.x' }]);
    expect(plain.error).toMatchObject({ code: -32602, message: 'This topic has no presence' });
    const unknown = await outsider.request('subscribe', ['$presence', { topic: 'nope' }]);
    expect(unknown.error).toMatchObject({ code: -32602, message: 'Unknown topic' });
    const bad = await outsider.request('subscribe', ['$presence', {}]);
    expect(bad.error?.code).toBe(-32602);
  });

  it('gives client.presence(topic) the member list, kept up to date', async () => {
    const running = await roomGateway();
    const seen = await watchedByClient(running);
    expect(seen.at(-1)).toEqual({ count: 0, members: [] });
    const ann = await member(running, 'ann');
    const annSub = (await ann.request('subscribe', ['room.1'])).result as string;
    await waitFor(() => seen.at(-1)?.count === 1, 'ann in');
    expect(seen.at(-1)!.members.map((m) => m.user)).toEqual(['ann']);
    await ann.request('unsubscribe', [annSub]);
    await waitFor(() => seen.at(-1)?.count === 0, 'ann out');
    expect(seen.at(-1)!.members).toEqual([]);
  });

  it('lists a session in client.presence(topic) while one of its subscriptions lasts', async () => {
    const running = await roomGateway();
    const seen = await watchedByClient(running);
    // Two members, one session: told apart by their ids.
    const ann = await member(running, 'ann');
    const first = (await ann.request('subscribe', ['room.1'])).result as string;
    await ann.request('subscribe', ['room.1']);
    await waitFor(() => seen.at(-1)?.count === 2, 'both of ann’s subscriptions in');
    expect(seen.at(-1)!.members.map((m) => m.user)).toEqual(['ann']);
    const before = (await running.gateway.presence('room.1').members()).members;
    // One ends: ann is still a member, and still listed.
    await ann.request('unsubscribe', [first]);
    await waitFor(() => seen.at(-1)?.count === 1, 'one of them out');
    expect(seen.at(-1)!.members.map((m) => m.user)).toEqual(['ann']);
    const after = (await running.gateway.presence('room.1').members()).members;
    expect(new Set(before.map((m) => m.id)).size).toBe(2);
    expect(after.map((m) => m.id)).toHaveLength(1);
    expect(before.map((m) => m.id)).toContain(after[0]!.id);
  });

  it('refuses a bad presence option when the topic is declared', async () => {
    const running = await roomGateway();
    const { gateway } = running;
    expect(() => gateway.topic('a.*', { presence: { maxListed: 0 } })).toThrow(
      new RangeError('topic "a.*": presence.maxListed must be an integer from 1 to 1000, not 0'),
    );
    expect(() => gateway.topic('b.*', { presence: 'yes' as unknown as boolean })).toThrow(
      new TypeError('topic "b.*": presence must be true or an object { info, maxListed }'),
    );
    expect(() =>
      gateway.topic('c.*', { presence: { infos: 1 } as unknown as { maxListed: number } }),
    ).toThrow(new TypeError('topic "c.*": presence.infos is not an option (info, maxListed)'));
  });
});
