/**
 * A refresh weighs each topic subscription against the topic's definition as it resolves then,
 * which can be one declared after the subscribe (an exact topic over a prefix, a longer prefix).
 * Its `authorize` decides on the params the client sent: the ones kept, or none when the
 * subscribe carried none. A subscription whose params were not kept (its definition had no
 * `authorize`) cannot give them, so it ends with -32004 rather than be weighed on other params.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { TopicOptions } from '../../src/server/pubsub-service.js';
import { stripped } from '../support/jsonrpc-model.js';
import { Resources } from '../support/resources.js';
import { token, tokenIdentity } from '../server/identity-tokens.js';
import type { TestContext } from '../server/identity-tokens.js';
import { openRawRpc } from '../server/raw-rpc.js';
import type { RawRpc } from '../server/raw-rpc.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Frame {
  subscription: string;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

async function open(url: string): Promise<RawRpc> {
  const socket = await openRawRpc(url, {
    authorization: `Bearer ${token({ user: 'ann', ttl: 60_000 })}`,
  });
  res.track(socket.socket);
  return socket;
}

async function subscribe(socket: RawRpc, topic: string, params?: unknown): Promise<string> {
  const reply = await socket.request('subscribe', params === undefined ? [topic] : [topic, params]);
  expect(reply.error).toBeUndefined();
  return reply.result as string;
}

async function refresh(socket: RawRpc): Promise<void> {
  const reply = await socket.request('rpc.authenticate', {
    token: token({ user: 'ann', ttl: 120_000 }),
  });
  expect(reply.error).toBeUndefined();
}

/** The subscription frames of `id` so far. */
function framesOf(socket: RawRpc, id: string): Frame[] {
  return socket.notifications
    .filter((n) => n.method === 'subscription')
    .map((n) => n.params as Frame)
    .filter((f) => f.subscription === id);
}

/** Resolve once `id` has a frame that `matches`. */
async function frameOf(socket: RawRpc, id: string, matches: (f: Frame) => boolean): Promise<Frame> {
  let count = socket.notifications.length;
  for (;;) {
    const found = framesOf(socket, id).find(matches);
    if (found) return found;
    await socket.notificationsAt(++count);
  }
}

/** `id` gets what is published to `topic` afterwards: it lives. */
async function expectLives(
  gateway: Gateway<TestContext>,
  socket: RawRpc,
  id: string,
  topic: string,
) {
  const mark = `to ${id}`;
  await gateway.publish(topic, mark);
  await frameOf(socket, id, (f) => f.result === mark);
}

/** `id` ended with the stream-end error -32004 naming `topic`, and nothing else of it came. */
async function expectEnded(socket: RawRpc, id: string, topic: string) {
  const end = await frameOf(socket, id, (f) => f.error !== undefined);
  expect(end.error).toEqual({
    code: ErrorCode.Unauthorized,
    message: 'No longer authorized for this topic',
    data: { topic },
  });
  expect(framesOf(socket, id)).toEqual([end]);
}

function sessionOf(gateway: Gateway<TestContext>) {
  const sessions = [...gateway.sessions.values()];
  expect(sessions).toHaveLength(1);
  return sessions[0]!;
}

/** An authorize that refuses `mode: "admin"` params, recording what it is asked with. */
function refusingAdmin(seen: unknown[]): TopicOptions<TestContext>['authorize'] {
  return ({ params }) => {
    seen.push(params);
    return (params as { mode?: string } | undefined)?.mode !== 'admin';
  };
}

describe('a refresh after a topic definition was declared over a subscription', () => {
  it('an exact topic with authorize: a subscription whose params were not kept ends -32004, one without params is asked with none', async () => {
    const { gateway, url } = await res.gateway<TestContext>(tokenIdentity());
    gateway.topic('chat.*');
    const socket = await open(url);
    const admin = await subscribe(socket, 'chat.secret', { mode: 'admin' });
    const plain = await subscribe(socket, 'chat.secret');
    const other = await subscribe(socket, 'chat.other', { mode: 'admin' });
    const seen: unknown[] = [];
    gateway.topic('chat.secret', { authorize: refusingAdmin(seen) });

    await refresh(socket);
    // Asked only for the subscription that sent no params, with none: what the client sent.
    expect(seen).toEqual([undefined]);
    expect(gateway.pubsub.subscriptionCount(sessionOf(gateway))).toBe(2);
    await expectEnded(socket, admin, 'chat.secret');
    await expectLives(gateway, socket, plain, 'chat.secret');
    await expectLives(gateway, socket, other, 'chat.other');
    expect(framesOf(socket, admin)).toHaveLength(1);
  });

  it('a more specific prefix with authorize: the same', async () => {
    const { gateway, url } = await res.gateway<TestContext>(tokenIdentity());
    gateway.topic('chat.*');
    const socket = await open(url);
    const admin = await subscribe(socket, 'chat.room.1', { mode: 'admin' });
    const plain = await subscribe(socket, 'chat.room.2');
    const other = await subscribe(socket, 'chat.lobby', { mode: 'admin' });
    const seen: unknown[] = [];
    gateway.topic('chat.room.*', { authorize: refusingAdmin(seen) });

    await refresh(socket);
    expect(seen).toEqual([undefined]);
    expect(gateway.pubsub.subscriptionCount(sessionOf(gateway))).toBe(2);
    await expectEnded(socket, admin, 'chat.room.1');
    await expectLives(gateway, socket, plain, 'chat.room.2');
    await expectLives(gateway, socket, other, 'chat.lobby');
  });

  it('a subscription admitted under an authorize gives its kept params to the authorize declared later', async () => {
    const { gateway, url } = await res.gateway<TestContext>(tokenIdentity());
    gateway.topic('desk.*', { authorize: () => true });
    const socket = await open(url);
    const admin = await subscribe(socket, 'desk.vip.1', { mode: 'admin' });
    const seat = await subscribe(socket, 'desk.vip.2', { mode: 'guest', seat: 7 });
    const seen: unknown[] = [];
    gateway.topic('desk.vip.*', { authorize: refusingAdmin(seen) });

    await refresh(socket);
    await expectEnded(socket, admin, 'desk.vip.1');
    expect(seen).toEqual(expect.arrayContaining([{ mode: 'admin' }, { mode: 'guest', seat: 7 }]));
    expect(seen).toHaveLength(2);
    await expectLives(gateway, socket, seat, 'desk.vip.2');
  });

  it('under an unchanged definition: without authorize it lives on, with one it is asked with its params', async () => {
    const { gateway, url } = await res.gateway<TestContext>(tokenIdentity());
    gateway.topic('open.*');
    const seen: unknown[] = [];
    gateway.topic('desk.*', { authorize: refusingAdmin(seen) });
    const socket = await open(url);
    const open1 = await subscribe(socket, 'open.a', { mode: 'admin' });
    const desk = await subscribe(socket, 'desk.a', { mode: 'guest' });
    // A definition that does not cover them changes nothing.
    gateway.topic('elsewhere.*', { authorize: () => false });
    seen.length = 0;

    await refresh(socket);
    expect(seen).toEqual([{ mode: 'guest' }]);
    expect(gateway.pubsub.subscriptionCount(sessionOf(gateway))).toBe(2);
    await expectLives(gateway, socket, open1, 'open.a');
    await expectLives(gateway, socket, desk, 'desk.a');
  });
});

describe('what the authorize of the definition a refresh resolves is asked with', () => {
  type Kind = 'exact' | 'prefix';
  const definition = fc.record({
    kind: fc.constantFrom<Kind>('exact', 'prefix'),
    authorize: fc.boolean(),
  });
  const scenario = fc.record({
    admitted: definition,
    later: fc.option(definition, { nil: undefined }),
    params: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }),
    verdict: fc.boolean(),
  });

  it('only what the client sent: else, with params not kept, the subscription ends -32004', async () => {
    // Unlimited connections: each run opens one, and shrinking a failure runs many more, which the
    // default rate per address would refuse 429 (shrinking to a counterexample of its own).
    const { gateway, url } = await res.gateway<TestContext>({
      ...tokenIdentity(),
      limits: { connectionsPerSecondPerIp: 0 },
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ admitted, later, params, verdict }) => {
        const root = `r${++run}`;
        const topic = `${root}.a.b`;
        const patternOf = (kind: Kind, depth: string) => (kind === 'exact' ? topic : depth);
        const asked: unknown[] = [];
        // Every hook admits the subscribe; at the refresh they answer `verdict`.
        let answer = true;
        const authorize: TopicOptions<TestContext>['authorize'] = ({ params: given }) => {
          asked.push(given);
          return answer;
        };
        gateway.topic(
          patternOf(admitted.kind, `${root}.*`),
          admitted.authorize ? { authorize } : {},
        );
        const socket = await open(url);
        const id = await subscribe(socket, topic, params);
        // An exact topic is declared only once; a longer prefix does not win over it.
        const declared =
          later !== undefined && !(later.kind === 'exact' && admitted.kind === 'exact');
        if (declared)
          gateway.topic(patternOf(later.kind, `${root}.a.*`), later.authorize ? { authorize } : {});
        const wins = declared && (later.kind === 'exact' || admitted.kind === 'prefix');
        const current = wins ? later : admitted;
        asked.length = 0;
        answer = verdict;

        await refresh(socket);
        // What the server reads: the array form's `null` is no params; JSON has no -0, and the
        // server's safe parse drops `__proto__` keys (fast-check generates that key).
        const sent: unknown =
          params === undefined || params === null
            ? undefined
            : stripped(JSON.parse(JSON.stringify(params)));
        const known = sent === undefined || admitted.authorize;
        if (!current.authorize) expect(asked).toEqual([]);
        else if (known) expect(asked).toEqual([sent]);
        else expect(asked).toEqual([]);
        if (!current.authorize || (known && verdict)) await expectLives(gateway, socket, id, topic);
        else await expectEnded(socket, id, topic);
        socket.close();
        await socket.closed;
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});
