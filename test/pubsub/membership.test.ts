// Server-side membership (session.join, session.leave, gateway.join, gateway.leave) on one
// gateway, as a raw client sees it on the wire: rpc.joined, then the frames a subscribe of its
// own would bring; refusals as a subscribe's; the stream end on leave; the limits.
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { RawRpc } from '../support/raw-rpc.js';
import type { SubscriptionParams, WireFrame } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const raws: RawRpc[] = [];
afterEach(async () => {
  for (const raw of raws.splice(0)) raw.socket.close();
  await res.cleanup();
});

interface Ctx {
  rooms: string[];
}

async function setup(options: GatewayOptions<Ctx> = {}) {
  const node = await res.gateway<Ctx>({
    authenticate: ({ query }) => ({ rooms: (query.get('rooms') ?? '').split(',') }),
    ...options,
  });
  node.gateway.topic('room.*', {
    authorize: ({ session, topic }) => session.context.rooms.includes(topic.slice(5)),
  });
  node.gateway.topic('open');
  return node;
}

/** A raw client and its session on `gateway`. */
async function rawSession(
  gateway: Gateway<Ctx>,
  url: string,
): Promise<{ raw: RawRpc; session: Session<Ctx> }> {
  const before = new Set(gateway.sessions.keys());
  const raw = await RawRpc.open(url);
  raws.push(raw);
  await waitUntil(() => gateway.sessions.size > before.size, 'the session');
  const session = [...gateway.sessions.values()].find((s) => !before.has(s.id))!;
  return { raw, session };
}

/** The subscription frames of `id`, their ids replaced, so two subscriptions' can be compared. */
function framesOf(raw: RawRpc, id: string): Omit<SubscriptionParams, 'subscription'>[] {
  return raw.notifications(id).map(({ subscription: _id, ...rest }) => rest);
}

function joinedNotices(raw: RawRpc): WireFrame[] {
  return raw.frames.filter((f) => f.method === 'rpc.joined');
}

describe('server-side membership', () => {
  it('announces rpc.joined before the first frame, then sends what a subscribe of its own gets', async () => {
    const { gateway, url } = await setup();
    const joinedSide = await rawSession(gateway, `${url}?rooms=a`);
    const ownSide = await rawSession(gateway, `${url}?rooms=a`);
    await gateway.publish('room.a', { n: 1 });
    const own = await ownSide.raw.request('subscribe', ['room.a', null, { position: true }]);
    const id = await joinedSide.session.join('room.a');
    expect(typeof id).toBe('string');
    for (const n of [2, 3]) await gateway.publish('room.a', { n });
    await joinedSide.raw.until(() => framesOf(joinedSide.raw, id).length === 3, 'three frames');
    await ownSide.raw.until(
      () => framesOf(ownSide.raw, own.result as string).length === 3,
      'three frames',
    );

    const notices = joinedNotices(joinedSide.raw);
    expect(notices).toEqual([
      { jsonrpc: '2.0', method: 'rpc.joined', params: { topic: 'room.a', subscription: id } },
    ]);
    const firstFrame = joinedSide.raw.frames.findIndex((f) => f.method === 'subscription');
    expect(joinedSide.raw.frames.indexOf(notices[0]!)).toBeLessThan(firstFrame);
    // The position (seq 1, where it starts), then the messages: the same as the own subscribe's.
    expect(framesOf(joinedSide.raw, id)).toEqual(framesOf(ownSide.raw, own.result as string));
    expect(framesOf(joinedSide.raw, id).map((f) => f.seq)).toEqual([1, 2, 3]);
  });

  it('with since, replays the messages after it first, and says so in rpc.joined', async () => {
    const { gateway, url } = await setup();
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a`);
    for (const n of [1, 2, 3]) await gateway.publish('room.a', { n });
    const id = await session.join('room.a', { since: 1 });
    await gateway.publish('room.a', { n: 4 });
    const messages = () => raw.notifications(id).filter((f) => f.result !== undefined);
    await raw.until(() => messages().length >= 3, 'the replay and the live one');
    expect(joinedNotices(raw)[0]!.params).toEqual({ topic: 'room.a', subscription: id, seq: 1 });
    expect(messages().map((f) => [f.seq, f.result])).toEqual([
      [2, { n: 2 }],
      [3, { n: 3 }],
      [4, { n: 4 }],
    ]);
  });

  it('is authorized like a subscribe: topicsOf, then the topic authorize (-32004); an unknown topic -32602', async () => {
    const { gateway, url } = await setup({
      identity: {
        topicsOf: (context) => (context.rooms.includes('claims') ? ['room.a'] : undefined),
      },
    });
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a,b,claims`);
    // The claims allow room.a only; the topic's authorize would allow room.b.
    const claimsRefusal = await session.join('room.b').catch((err: unknown) => err);
    expect(claimsRefusal).toBeInstanceOf(JsonRpcError);
    expect(claimsRefusal).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'room.b' },
    });
    const other = await rawSession(gateway, `${url}?rooms=c`);
    await expect(other.session.join('room.a')).rejects.toMatchObject({
      code: ErrorCode.Unauthorized,
      message: 'Not authorized for this topic',
    });
    await expect(session.join('nowhere')).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
      data: { topic: 'nowhere' },
    });
    await expect(session.join('$node.x')).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
    await expect(session.join('room.a', { since: -1 })).rejects.toThrow(RangeError);
    await raw.barrier();
    expect(joinedNotices(raw)).toEqual([]);
    expect(gateway.pubsub.topics()).toEqual({});
  });

  it('counts against the session subscription limits (-32005), and a second join of a topic keeps the first', async () => {
    const { gateway, url } = await setup({ limits: { maxSubscriptions: 2 } });
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a,b,c`);
    const own = await raw.request('subscribe', ['room.a']);
    const joined = await session.join('room.b');
    expect(await session.join('room.b')).toBe(joined);
    // A topic the session subscribed itself counts as joined already.
    expect(await session.join('room.a')).toBe(own.result);
    await expect(session.join('room.c')).rejects.toMatchObject({
      code: ErrorCode.TooManySubscriptions,
      data: { limit: 2 },
    });
    const refused = await raw.request('subscribe', ['open']);
    expect(refused.error?.code).toBe(ErrorCode.TooManySubscriptions);
    await raw.barrier();
    expect(joinedNotices(raw)).toHaveLength(1);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(2);
  });

  it('two joins of one topic at once make one subscription', async () => {
    const { gateway, url } = await setup();
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a`);
    const [first, second] = await Promise.all([session.join('room.a'), session.join('room.a')]);
    expect(second).toBe(first);
    await raw.barrier();
    expect(joinedNotices(raw)).toHaveLength(1);
    expect(gateway.pubsub.subscriptionCount(session)).toBe(1);
  });

  it('leave ends the subscription with the stream-end complete frame and releases the topic', async () => {
    const { gateway, url } = await setup();
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a`);
    const id = await session.join('room.a');
    await gateway.publish('room.a', 'hello');
    await raw.until(() => raw.notifications(id).some((f) => f.result === 'hello'), 'hello');
    expect(session.leave('room.a')).toBe(true);
    await raw.until(() => raw.notifications(id).some((f) => f.complete), 'the stream end');
    expect(raw.notifications(id).at(-1)).toEqual({ subscription: id, complete: true });
    expect(gateway.pubsub.topics()).toEqual({});
    await gateway.publish('room.a', 'after');
    await raw.barrier();
    expect(raw.notifications(id).some((f) => f.result === 'after')).toBe(false);
    expect(session.leave('room.a')).toBe(false);
    // The subscription is gone: unsubscribing it is answered false.
    expect((await raw.request('unsubscribe', [id])).result).toBe(false);
  });

  it('gateway.join and gateway.leave reach a session by id; an unknown id resolves false', async () => {
    const { gateway, url } = await setup();
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a`);
    expect(await gateway.join(session.id, 'room.a')).toBe(true);
    await raw.until(() => joinedNotices(raw).length === 1, 'rpc.joined');
    expect(await gateway.join(`${gateway.nodeId}-nobody`, 'room.a')).toBe(false);
    expect(await gateway.leave(`${gateway.nodeId}-nobody`, 'room.a')).toBe(false);
    expect(await gateway.leave(session.id, 'room.a')).toBe(true);
    expect(await gateway.leave(session.id, 'room.a')).toBe(false);
    await expect(gateway.join(session.id, 'room.z')).rejects.toMatchObject({
      code: ErrorCode.Unauthorized,
    });
  });

  it('a raw client that ignores rpc.joined still gets the frames, under an id it never asked for', async () => {
    const { gateway, url } = await setup();
    const { raw, session } = await rawSession(gateway, `${url}?rooms=a`);
    const id = await session.join('room.a');
    await gateway.publish('room.a', { text: 'hi' });
    await raw.until(() => raw.notifications(id).some((f) => f.seq === 1), 'the message');
    expect(raw.notifications(id).map((f) => f.result)).toContain(undefined); // the position
    expect(raw.notifications(id).at(-1)).toEqual({
      subscription: id,
      seq: 1,
      result: { text: 'hi' },
    });
    // And it can end it as its own.
    expect((await raw.request('unsubscribe', [id])).result).toBe(true);
    expect(gateway.pubsub.topics()).toEqual({});
  });

  it('joins in a connected$ observer; refuses a closed session', async () => {
    const { gateway, url } = await setup();
    const joins: Promise<string>[] = [];
    gateway.connected$.subscribe((session) => joins.push(session.join('open')));
    const { raw, session } = await rawSession(gateway, url);
    const id = await joins[0]!;
    await raw.until(() => raw.notifications(id).length === 1, 'the position');
    raw.socket.close();
    await waitUntil(() => session.isClosed, 'the close');
    await expect(session.join('room.a')).rejects.toThrow(/closed/i);
    expect(session.leave('open')).toBe(false);
  });
});
