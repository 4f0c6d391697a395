/**
 * User inboxes on one gateway (memory broker): `notifyUser` messages numbered in a bounded
 * history per user, resumed by a client with `inbox: true` after a reconnect, exactly once and
 * in order, with a gap signal of the exact count past retention; third-party sessions of the
 * user keep getting plain notifications; sessions without a user are refused `$inbox`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { InboxGap } from '../../src/client/inbox.js';
import { ErrorCode } from '../../src/index.js';
import type { JsonRpcError } from '../../src/index.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import { createGateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { captureLogger } from '../support/logging.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Ctx {
  user: string | undefined;
}

/**
 * A gateway whose sessions belong to `?user=`, with user inboxes. `admit` gates new
 * connections: while it is pending, a client that lost its connection stays out.
 */
async function inboxGateway(options: Partial<GatewayOptions<Ctx>> = {}) {
  const gate = { admit: Promise.resolve() };
  const running = await res.gateway<Ctx>({
    authenticate: async ({ query }) => {
      await gate.admit;
      return { user: query.get('user') ?? undefined };
    },
    userOf: (context) => context.user,
    userInbox: { maxLength: 50 },
    ...options,
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user ?? null);
  return { ...running, gate };
}

/** Raw sockets are closed by the harness with the other sockets. */
async function raw(url: string): Promise<RawRpc> {
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return client;
}

/** Close every open session of the gateway, keep new ones out until `reopen()`. */
async function dropEveryone(running: Awaited<ReturnType<typeof inboxGateway>>) {
  const stayOut = deferred();
  running.gate.admit = stayOut.promise;
  for (const session of running.gateway.sessions.values()) session.close(1012, 'restart');
  await waitUntil(() => running.gateway.sessions.size === 0, 'every session to close');
  return { reopen: () => stayOut.resolve() };
}

describe('user inbox: options', () => {
  it('are checked when the gateway is made, naming the option', () => {
    const userOf = (c: Ctx) => c.user;
    expect(() => createGateway<Ctx>({ userInbox: true })).toThrow(
      new TypeError('userInbox needs userOf: the inbox is per user, and a session has none'),
    );
    expect(() => createGateway<Ctx>({ userOf, userInbox: { maxLength: 0 } })).toThrow(
      new RangeError('userInbox.maxLength must be an integer from 1 to 100000, not 0'),
    );
    expect(() => createGateway<Ctx>({ userOf, userInbox: { maxAgeMs: 1.5e3 + 0.5 } })).toThrow(
      RangeError,
    );
    expect(() => createGateway<Ctx>({ userOf, userInbox: { holdMs: 60_001 } })).toThrow(
      /userInbox\.holdMs/,
    );
    expect(() =>
      createGateway<Ctx>({ userOf, userInbox: { maxLength: '5' as unknown as number } }),
    ).toThrow(new TypeError('userInbox.maxLength must be a number, not string'));
    expect(() =>
      createGateway<Ctx>({ userOf, userInbox: { maxLenght: 5 } as unknown as boolean }),
    ).toThrow(
      new TypeError(
        'userInbox.maxLenght is not an option of userInbox (did you mean userInbox.maxLength?)',
      ),
    );
    expect(() => createGateway<Ctx>({ userOf, userInbox: 'on' as unknown as boolean })).toThrow(
      TypeError,
    );
  });
});

describe('user inbox on one gateway', () => {
  it('messages sent while the client reconnects arrive after it, exactly once, in order', async () => {
    const running = await inboxGateway();
    const { gateway, url } = running;
    const client = res.client(`${url}?user=alice`, { inbox: true });
    const got: unknown[] = [];
    client.notificationsOf('msg').subscribe((params) => got.push(params));
    const handled: unknown[] = [];
    client.method('msg', (params) => void handled.push(params));
    const gaps: InboxGap[] = [];
    client.inboxGaps$.subscribe((gap) => gaps.push(gap));
    await client.opened();
    await waitUntil(() => gateway.pubsub.topics()['~inbox.alice'] === 1, 'the inbox subscription');

    for (let i = 1; i <= 3; i++) expect(await gateway.notifyUser('alice', 'msg', [i])).toBe(i);
    await waitUntil(() => got.length === 3, 'the first three');

    const { reopen } = await dropEveryone(running);
    for (let i = 4; i <= 8; i++) await gateway.notifyUser('alice', 'msg', [i]);
    reopen();
    await waitUntil(() => got.length >= 8, 'the five sent while disconnected');
    for (let i = 9; i <= 10; i++) await gateway.notifyUser('alice', 'msg', [i]);
    await waitUntil(() => got.length >= 10, 'two more, live');
    await client.call('rpc.ping'); // anything still on its way is here now

    const expected = Array.from({ length: 10 }, (_, i) => [i + 1]);
    expect(got).toEqual(expected);
    expect(handled).toEqual(expected); // the handler for `msg` ran as for a plain notification
    expect(gaps).toEqual([]);
  });

  it('past retention, the gap signal says exactly how many were lost', async () => {
    const running = await inboxGateway({ userInbox: { maxLength: 3 } });
    const { gateway, url } = running;
    const client = res.client(`${url}?user=bob`, { inbox: true });
    const events: unknown[] = [];
    client.notificationsOf('msg').subscribe((params) => events.push(params));
    client.inboxGaps$.subscribe((gap) => events.push(gap));
    await client.opened();
    await waitUntil(() => gateway.pubsub.topics()['~inbox.bob'] === 1, 'the inbox subscription');
    await gateway.notifyUser('bob', 'msg', [1]);
    await waitUntil(() => events.length === 1, 'the first message');

    const { reopen } = await dropEveryone(running);
    // Seven while away; history keeps the last three (6, 7, 8): 2 to 5 are lost.
    for (let i = 2; i <= 8; i++) await gateway.notifyUser('bob', 'msg', [i]);
    reopen();
    await waitUntil(() => events.length >= 5, 'the gap signal and the retained three');
    await client.call('rpc.ping');
    expect(events).toEqual([[1], { gap: 4 }, [6], [7], [8]]);
  });

  it("a third-party session of the user without $inbox keeps getting plain notifications, beside an inbox client's", async () => {
    const { gateway, url } = await inboxGateway({ userInbox: { holdMs: 60_000 } });
    const client = res.client(`${url}?user=carol`, { inbox: true });
    const got: unknown[] = [];
    client.notificationsOf('msg').subscribe((params) => got.push(params));
    await client.opened();
    await waitUntil(() => gateway.pubsub.topics()['~inbox.carol'] === 1, 'the inbox subscription');

    const plain = await raw(`${url}?user=carol`);
    expect((await plain.request('whoami')).result).toBe('carol'); // its first call: plain from now
    const other = await raw(`${url}?user=dave`);
    await other.barrier();
    expect(await gateway.notifyUser('carol', 'msg', { n: 1 })).toBe(1);
    await plain.until(() => plain.frames.some((f) => f.method === 'msg'), 'the plain notification');
    await waitUntil(() => got.length === 1, 'the inbox client');
    await Promise.all([plain.barrier(), other.barrier(), client.call('rpc.ping')]);

    expect(plain.frames.filter((f) => f.method !== undefined)).toEqual([
      { jsonrpc: '2.0', method: 'msg', params: { n: 1 } },
    ]);
    expect(other.frames.filter((f) => f.method !== undefined)).toEqual([]);
    expect(got).toEqual([{ n: 1 }]);
  });

  it('a new session that has not called anything yet gets what was sent meanwhile: plain after holdMs, or through $inbox from its first call', async () => {
    const { gateway, url } = await inboxGateway({ userInbox: { holdMs: 300 } });
    const silent = await raw(`${url}?user=erin`);
    await waitUntil(() => gateway.sessions.size === 1, 'the silent session');
    await gateway.notifyUser('erin', 'msg', [1]);
    // Held while it may still be an inbox client, then sent plain: nothing is lost either way.
    await silent.until(() => silent.frames.length === 1, 'the held message, plain');
    expect(silent.frames).toEqual([{ jsonrpc: '2.0', method: 'msg', params: [1] }]);

    const late = await inboxGateway({ userInbox: { holdMs: 60_000 } });
    const fresh = await raw(`${late.url}?user=erin`);
    await waitUntil(() => late.gateway.sessions.size === 1, 'the fresh session');
    await late.gateway.notifyUser('erin', 'msg', [1]); // before its first call
    const accepted = await fresh.request('subscribe', ['$inbox', null, { position: true }]);
    const id = accepted.result as string;
    expect(typeof id).toBe('string');
    await late.gateway.notifyUser('erin', 'msg', [2]);
    await fresh.until(() => fresh.notifications(id).length === 3, 'the epoch and both messages');
    const [told, first, second] = fresh.notifications(id);
    expect(told).toEqual({ subscription: id, epoch: expect.any(String) });
    expect(first).toEqual({ subscription: id, seq: 1, result: { method: 'msg', params: [1] } });
    expect(second).toEqual({ subscription: id, seq: 2, result: { method: 'msg', params: [2] } });
    expect(fresh.frames.filter((f) => f.method === 'msg')).toEqual([]); // nothing plain
  });

  it('an inbox message on the broker that no notification may carry (params too deep, not structured) reaches no session, and the gateway stays up', async () => {
    const broker = new MemoryBroker();
    const { gateway, url } = await inboxGateway({ broker, userInbox: { holdMs: 300 } });
    // One session past its hold (plain), one still held (undecided): the two ways a message goes.
    const plain = await raw(`${url}?user=gina`);
    expect((await plain.request('whoami')).result).toBe('gina');
    const held = await raw(`${url}?user=gina`);
    await waitUntil(() => gateway.sessions.size === 2, 'both sessions');
    // What another node, or anything else writing to the broker, may leave in the inbox.
    const deep = '['.repeat(600) + ']'.repeat(600);
    for (const payload of [
      `{"method":"deep","params":${deep}}`,
      '{"method":"scalar","params":5}',
      '{"method":"null","params":null}',
    ]) {
      await broker.publish('~inbox.gina', payload, { maxLength: 50, maxAgeMs: 60_000 });
    }
    await gateway.notifyUser('gina', 'fine', [1]);
    for (const client of [plain, held]) {
      await client.until(() => client.frames.some((f) => f.method === 'fine'), 'the good one');
    }
    expect(plain.frames.filter((f) => f.method !== undefined)).toEqual([
      { jsonrpc: '2.0', method: 'fine', params: [1] },
    ]);
    expect(held.frames).toEqual([{ jsonrpc: '2.0', method: 'fine', params: [1] }]);
    expect((await held.request('whoami')).result).toBe('gina');
  });

  it('$inbox is the wire name: position, then numbered { method, params } messages; resume with since and epoch', async () => {
    const { gateway, url } = await inboxGateway();
    await gateway.notifyUser('frank', 'msg', ['before']);
    const first = await raw(`${url}?user=frank`);
    const accepted = await first.request('subscribe', ['$inbox', null, { position: true }]);
    const id = accepted.result as string;
    await first.until(() => first.notifications(id).length === 1, 'the position');
    const [position] = first.notifications(id);
    expect(position).toEqual({ subscription: id, seq: 1, epoch: expect.any(String) });
    await gateway.notifyUser('frank', 'msg', ['one']);
    await gateway.notifyUser('frank', 'other', { two: 2 });
    await first.until(() => first.notifications(id).length === 3, 'two messages');
    expect(first.notifications(id).slice(1)).toEqual([
      { subscription: id, seq: 2, result: { method: 'msg', params: ['one'] } },
      { subscription: id, seq: 3, result: { method: 'other', params: { two: 2 } } },
    ]);
    await first.close();

    const again = await raw(`${url}?user=frank`);
    const resumed = await again.request('subscribe', {
      topic: '$inbox',
      since: 2,
      epoch: position!.epoch,
    });
    const id2 = resumed.result as string;
    await again.until(() => again.notifications(id2).length === 1, 'the one after since');
    expect(again.notifications(id2)).toEqual([
      { subscription: id2, seq: 3, result: { method: 'other', params: { two: 2 } } },
    ]);
    await again.close();
    await waitUntil(() => gateway.sessions.size === 0, 'the sessions to close');
    expect(gateway.pubsub.topics()).toEqual({}); // the inbox topic is let go with the user
  });

  it('a session without a user is refused $inbox precisely; its client warns once and carries on', async () => {
    const { gateway, url } = await inboxGateway();
    const anonymous = await raw(url);
    const refused = await anonymous.request('subscribe', ['$inbox', null, { position: true }]);
    expect(refused.error).toEqual({
      code: ErrorCode.Unauthorized,
      message: 'The inbox is for sessions of a user: this session has none',
      data: { topic: '$inbox' },
    });
    // Nobody can reach another user's inbox by its broker topic's name.
    gateway.topic('*');
    const byName = await anonymous.request('subscribe', ['~inbox.alice']);
    expect(byName.error).toMatchObject({ code: ErrorCode.InvalidParams });
    expect(() => gateway.topic('~inbox.*')).toThrow(/reserved/);

    const { logger, records } = captureLogger();
    const client = res.client(url, { inbox: true, logger });
    let completed = false;
    client.inboxGaps$.subscribe({ complete: () => (completed = true) });
    await waitUntil(() => completed, 'the inbox to give up');
    expect(await client.call('whoami')).toBe(null); // the client carries on
    const warnings = records.filter((r) => r.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect((warnings[0]!.obj as { err: JsonRpcError }).err.code).toBe(ErrorCode.Unauthorized);
  });

  it('a gateway without userInbox refuses $inbox: the client warns once and still gets plain notifications', async () => {
    const { gateway, url } = await res.gateway<Ctx>({
      authenticate: ({ query }) => {
        const user = query.get('user');
        if (!user) throw new UpgradeRejection(401);
        return { user };
      },
      userOf: (context) => context.user,
    });
    const { logger, records } = captureLogger();
    const client = res.client(`${url}?user=gina`, { inbox: true, logger });
    let completed = false;
    client.inboxGaps$.subscribe({ complete: () => (completed = true) });
    await waitUntil(() => completed, 'the inbox to give up');
    const got: unknown[] = [];
    client.notificationsOf('msg').subscribe((params) => got.push(params));
    expect(await gateway.notifyUser('gina', 'msg', [1])).toBeUndefined();
    await waitUntil(() => got.length === 1, 'the plain notification');
    const warnings = records.filter((r) => r.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect((warnings[0]!.obj as { err: JsonRpcError }).err.code).toBe(ErrorCode.InvalidParams);
  });
});

describe('user inbox: a new session whose $inbox subscribe does not take', () => {
  it('a $inbox subscribe without position starts from the first message held for the session', async () => {
    const { gateway, url } = await inboxGateway({ userInbox: { holdMs: 60_000 } });
    const fresh = await raw(`${url}?user=hana`);
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    await gateway.notifyUser('hana', 'msg', [1]); // before its first call
    const id = (await fresh.request('subscribe', ['$inbox'])).result as string;
    await gateway.notifyUser('hana', 'msg', [2]);
    await fresh.until(() => fresh.notifications(id).length === 3, 'the epoch and both messages');
    expect(fresh.notifications(id).slice(1)).toEqual([
      { subscription: id, seq: 1, result: { method: 'msg', params: [1] } },
      { subscription: id, seq: 2, result: { method: 'msg', params: [2] } },
    ]);
  });

  it('sent as a notification, malformed, or refused: the session still gets every message plain', async () => {
    const { gateway, url } = await inboxGateway({
      userInbox: { holdMs: 60_000 },
      limits: { maxSubscriptions: 0 },
    });
    const asNotification = await raw(`${url}?user=ivy`);
    const malformed = await raw(`${url}?user=ivy`);
    const refused = await raw(`${url}?user=ivy`);
    await waitUntil(() => gateway.sessions.size === 3, 'the sessions');
    await gateway.notifyUser('ivy', 'msg', [1]);
    asNotification.send({ jsonrpc: '2.0', method: 'subscribe', params: ['$inbox'] });
    await asNotification.barrier();
    const bad = await malformed.request('subscribe', ['$inbox', null, { since: 'x' }]);
    expect(bad.error?.code).toBe(ErrorCode.InvalidParams);
    const full = await refused.request('subscribe', ['$inbox', null, { position: true }]);
    expect(full.error?.code).toBe(ErrorCode.TooManySubscriptions);
    await gateway.notifyUser('ivy', 'msg', [2]);
    for (const session of [asNotification, malformed, refused]) {
      expect((await session.request('whoami')).result).toBe('ivy'); // its next call: plain
      await session.until(
        () => session.frames.filter((f) => f.method === 'msg').length === 2,
        'both',
      );
      expect(session.frames.filter((f) => f.method === 'msg').map((f) => f.params)).toEqual([
        [1],
        [2],
      ]);
    }
  });

  it('a $inbox subscribe that fails after it started gives back what came meanwhile: a retry starts from there', async () => {
    const broker = new MemoryBroker();
    const history = broker.history.bind(broker);
    // The first position read waits for the test, then fails: the subscription has joined the
    // topic by then, and what is sent meanwhile would be its first messages.
    const readRefused = deferred();
    let positionReads = 0;
    broker.history = (topic, afterSeq, limit) =>
      afterSeq === Number.MAX_SAFE_INTEGER && positionReads++ === 0
        ? readRefused.promise.then(() => Promise.reject(new Error('read refused')))
        : history(topic, afterSeq, limit);
    const { gateway, url } = await inboxGateway({ broker, userInbox: { holdMs: 60_000 } });
    const fresh = await raw(`${url}?user=jo`);
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const failing = fresh.request('subscribe', ['$inbox', null, { position: true }]);
    await waitUntil(() => positionReads === 1, 'the position read');
    await gateway.notifyUser('jo', 'msg', [1]);
    readRefused.resolve();
    expect((await failing).error?.code).toBe(ErrorCode.BrokerUnavailable);
    await gateway.notifyUser('jo', 'msg', [2]);
    const id = (await fresh.request('subscribe', ['$inbox', null, { position: true }]))
      .result as string;
    await fresh.until(() => fresh.notifications(id).length === 3, 'the epoch and both messages');
    expect(
      fresh
        .notifications(id)
        .slice(1)
        .map((n) => n.seq),
    ).toEqual([1, 2]);
    expect(fresh.frames.filter((f) => f.method === 'msg')).toEqual([]); // nothing plain
  });
});
