/**
 * notifySession, notifyUser and session.notify hold params to MAX_ENCODED_DEPTH as publish holds
 * its data: a deeper value is refused with publish's RangeError where it enters, on the calling
 * node, before anyone is sent anything; a MessagePack connection it was meant for stays open
 * (past the bound its encoder could not write the message, and the connection would close 1011).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import type { ConnectionState } from '../../src/client/connection-state.js';
import { MAX_ENCODED_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import type { Params } from '../../src/protocol/types.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);

const resources = new Resources();
const brokers: Broker[] = [];
afterEach(async () => {
  await resources.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
});

const REFUSAL = `params nests deeper than ${MAX_ENCODED_DEPTH} levels, the most a value the gateway sends may`;

/**
 * `0` inside `levels` containers: arrays, or one-key objects where the pattern `wrappers`
 * (repeated from the inside out) has a 1.
 */
function nested(levels: number, wrappers: readonly number[] = [0]): Params {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) {
    value = wrappers[i % wrappers.length] === 1 ? { k: value } : [value];
  }
  return value as Params;
}

type User = { user: string };

function userGateway(options: GatewayOptions<User> = {}) {
  return resources.gateway<User>({
    encodings: ['json', 'msgpack'],
    heartbeatIntervalMs: 0,
    authenticate: ({ query }) => {
      const user = query.get('user');
      if (!user) throw new UpgradeRejection(401);
      return { user };
    },
    userOf: (context) => context.user,
    ...options,
  });
}

/** A client of `user` that does not reconnect, with the 'note' notifications and states it saw. */
async function watchedClient(url: string, user: string, binary = true) {
  const client: RpcClient = resources.client(`${url}?user=${user}`, {
    ...(binary ? { encoding: msgpack } : {}),
    reconnect: false,
  });
  const notes: unknown[] = [];
  const states: ConnectionState[] = [];
  client.notificationsOf('note').subscribe((params) => notes.push(params));
  client.state$.subscribe((state) => states.push(state));
  // Answered: the session is open and reachable from here on.
  await client.call('rpc.ping');
  return { client, notes, states };
}

/** Still open, never closed or reconnected, and answering. */
async function stillOpen(watched: Awaited<ReturnType<typeof watchedClient>>, n: number) {
  expect(await within(watched.client.call('rpc.ping'), `ping ${n}`)).toBeDefined();
  expect(watched.states.filter((s) => s !== 'connecting' && s !== 'open')).toEqual([]);
  expect(watched.client.state).toBe('open');
}

async function newBroker(kind: 'redis' | 'nats', prefix: string): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: 'redis://127.0.0.1:6379', prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: 'nats://127.0.0.1:4222', prefix });
  brokers.push(broker);
  return broker;
}

describe('params deeper than MAX_ENCODED_DEPTH, on one node', () => {
  it('publish, notifySession and notifyUser refuse them alike; the MessagePack client stays open', async () => {
    const { gateway, url } = await userGateway();
    gateway.topic('t.*');
    const watched = await watchedClient(url, 'ann');
    const [session] = gateway.sessions.values();
    const deep = nested(600);

    const published = await gateway.publish('t.x', deep).catch((err: unknown) => err);
    expect(published).toBeInstanceOf(RangeError);
    const toSession = await gateway
      .notifySession(session!.id, 'note', deep)
      .catch((err: unknown) => err);
    const toUser = await gateway.notifyUser('ann', 'note', deep).catch((err: unknown) => err);
    for (const err of [toSession, toUser]) {
      expect(err).toBeInstanceOf(RangeError);
      expect((err as Error).message).toBe(REFUSAL);
      expect((err as Error).message).toBe((published as Error).message.replace(/^data/, 'params'));
    }

    // Nothing was sent: the first 'note' the client gets is the one after.
    expect(await gateway.notifySession(session!.id, 'note', ['after'])).toBe(true);
    await waitUntil(() => watched.notes.length > 0, 'the next note');
    expect(watched.notes).toEqual([['after']]);
    await stillOpen(watched, 1);
    expect([...gateway.sessions.keys()]).toEqual([session!.id]);
  });

  it('params that are not an object or an array are refused (TypeError) by notifySession, notifyUser and session.notify alike', async () => {
    const { gateway, url } = await userGateway();
    const watched = await watchedClient(url, 'cy');
    const [session] = gateway.sessions.values();
    for (const params of [null, 5, 'text', true] as unknown as Params[]) {
      const refusal = `params must be an object or an array, not ${params === null ? 'null' : typeof params}`;
      await expect(gateway.notifySession(session!.id, 'note', params)).rejects.toThrow(
        new TypeError(refusal),
      );
      await expect(gateway.notifyUser('cy', 'note', params)).rejects.toThrow(
        new TypeError(refusal),
      );
      expect(() => session!.notify('note', params)).toThrow(new TypeError(refusal));
    }
    expect(await gateway.notifySession(session!.id, 'note', ['after'])).toBe(true);
    await waitUntil(() => watched.notes.length > 0, 'the next note');
    expect(watched.notes).toEqual([['after']]);
  });

  it('session.notify throws the RangeError and sends nothing', async () => {
    const { gateway, url } = await userGateway();
    const watched = await watchedClient(url, 'bob');
    const [session] = gateway.sessions.values();
    expect(() => session!.notify('note', nested(MAX_ENCODED_DEPTH + 1))).toThrow(
      new RangeError(REFUSAL),
    );
    // Refused whatever becomes of it after: an object at the top counts as a level too.
    expect(() => session!.notify('note', { a: nested(MAX_ENCODED_DEPTH) })).toThrow(RangeError);
    session!.notify('note', { a: nested(MAX_ENCODED_DEPTH - 1) });
    await waitUntil(() => watched.notes.length > 0, 'the next note');
    expect(watched.notes).toEqual([{ a: nested(MAX_ENCODED_DEPTH - 1) }]);
    await stillOpen(watched, 1);
  });

  it('accepted exactly when the depth is within the bound, and the connection stays open (property)', async () => {
    const { gateway, url } = await userGateway();
    const watched = await watchedClient(url, 'cid');
    const [session] = gateway.sessions.values();
    type Via = 'notifySession' | 'notifyUser' | 'session.notify';
    const send = async (via: Via, params: Params): Promise<void> => {
      if (via === 'notifySession') await gateway.notifySession(session!.id, 'note', params);
      else if (via === 'notifyUser') await gateway.notifyUser('cid', 'note', params);
      else session!.notify('note', params);
    };
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Via>('notifySession', 'notifyUser', 'session.notify'),
        fc.integer({ min: MAX_ENCODED_DEPTH - 2, max: MAX_ENCODED_DEPTH + 3 }),
        fc.array(fc.constantFrom(0, 1), { minLength: 1, maxLength: 6 }),
        async (via, depth, wrappers) => {
          run++;
          const params = nested(depth, wrappers);
          const outcome = await send(via, params).then(
            () => 'accepted',
            (err: unknown) => err,
          );
          if (depth <= MAX_ENCODED_DEPTH) {
            expect(outcome).toBe('accepted');
          } else {
            expect(outcome).toBeInstanceOf(RangeError);
            expect((outcome as Error).message).toBe(REFUSAL);
          }
          // A marker by the same way behind it: what arrived before it is what was sent.
          await send(via, { marker: run });
          await waitUntil(
            () =>
              watched.notes.some((n) => (n as { marker?: number }).marker === run) ||
              watched.client.state === 'closed',
            'the marker, or the close',
          );
          const arrived = watched.notes.splice(0);
          expect(arrived).toEqual(
            depth <= MAX_ENCODED_DEPTH ? [params, { marker: run }] : [{ marker: run }],
          );
          await stillOpen(watched, run);
        },
      ),
      // One connection carries every run: shrinking on it after a failure would only wait.
      { numRuns: 36, endOnFailure: true },
    );
    expect([...gateway.sessions.keys()]).toEqual([session!.id]);
  });
});

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    `params deeper than MAX_ENCODED_DEPTH across nodes (${kind})`,
    () => {
      it('refused on the calling node: the other node sends nothing, in any encoding', async () => {
        const prefix = `wsrpcnotifydepth${Math.random().toString(36).slice(2)}`;
        const a = await userGateway({ broker: await newBroker(kind, prefix) });
        const b = await userGateway({ broker: await newBroker(kind, prefix) });
        const binary = await watchedClient(b.url, 'dee');
        const json = await watchedClient(b.url, 'dee', false);
        await waitUntil(() => b.gateway.sessions.size === 2, 'both sessions on node B');
        const [first] = b.gateway.sessions.keys();
        expect(a.gateway.sessions.has(first!)).toBe(false);
        const deep = nested(MAX_ENCODED_DEPTH + 1);

        await expect(a.gateway.notifyUser('dee', 'note', deep)).rejects.toThrow(
          new RangeError(REFUSAL),
        );
        await expect(a.gateway.notifySession(first!, 'note', deep)).rejects.toThrow(
          new RangeError(REFUSAL),
        );

        await a.gateway.notifyUser('dee', 'note', ['after']);
        await waitUntil(
          () => binary.notes.length > 0 && json.notes.length > 0,
          'the next note on both connections',
        );
        expect(binary.notes).toEqual([['after']]);
        expect(json.notes).toEqual([['after']]);
        await stillOpen(binary, 1);
        await stillOpen(json, 1);
        expect(b.gateway.sessions.size).toBe(2);
      });

      it('from a node that does not check, sent to no session and thrown nowhere', async () => {
        const prefix = `wsrpcnotifydepth${Math.random().toString(36).slice(2)}`;
        const b = await userGateway({ broker: await newBroker(kind, prefix) });
        const binary = await watchedClient(b.url, 'dee');
        const json = await watchedClient(b.url, 'dee', false);
        await waitUntil(() => b.gateway.sessions.size === 2, 'both sessions on node B');
        // What notifyUser on a node without the check puts on the broker, as it would.
        const raw = await newBroker(kind, prefix);
        const directed = (params: Params) =>
          raw.publish('$user.dee', JSON.stringify({ user: 'dee', method: 'note', params }), {
            maxLength: 1,
            maxAgeMs: 60_000,
          });
        await directed(nested(MAX_ENCODED_DEPTH + 1));
        await directed(['after']);
        await waitUntil(
          () => binary.notes.length > 0 && json.notes.length > 0,
          'the next note on both connections',
        );
        // All or none: the JSON connection, which could be sent it, is not sent it either.
        expect(binary.notes).toEqual([['after']]);
        expect(json.notes).toEqual([['after']]);
        await stillOpen(binary, 1);
        await stillOpen(json, 1);
      });
    },
  );
}
