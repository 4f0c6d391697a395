/**
 * A call one node makes to a client on another, while that other node's server API closes (what
 * SIGTERM does once the node's sessions are drained): the call in progress is let finish and its answer reaches the caller; one
 * the close cuts (the gateway closing its sessions) answers -32011 at once; a call arriving while
 * the closed API waits for those answers -32011 at once too (the client is on its way to another
 * node), and so does one arriving once the API closed with nothing in progress. Never -32012 after
 * the caller's whole timeoutMs. A server API started again on the same gateway serves calls
 * again. Two gateways in this process share Redis, and NATS.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { NATS_URL, REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { asUser, post, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers: Broker[] = [];
const apis: ServerApi[] = [];
const redisPrefixes: string[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  for (const prefix of redisPrefixes) await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
});

/** Far longer than any test waits: a call answered -32012 failed the test already. */
const CALL_TIMEOUT_MS = 60_000;
/** How long a test waits for an answer that should come at once (or on the client's answer). */
const WAIT_MS = 15_000;

type Kind = 'redis' | 'nats';

async function newBroker(kind: Kind, prefix: string): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: NATS_URL, prefix, timeoutMs: 2_000 });
  brokers.push(broker);
  return broker;
}

/**
 * Nodes A and B, and a client on B whose method `held` answers "answered" once `release` is
 * called; `called` resolves when the call reached it.
 */
async function heldOnB(kind: Kind) {
  const prefix = `wsrpcapi${randomBytes(5).toString('hex')}`;
  if (kind === 'redis') redisPrefixes.push(prefix);
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const running = await res.gateway(userOptions(await newBroker(kind, prefix)));
    const api = await startApi(running.gateway);
    apis.push(api);
    nodes.push({ ...running, api });
  }
  const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
  const client = res.client(asUser(b.url, 'bob'));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const called = new Promise<void>((resolve) => (reached = resolve));
  client.method('held', async () => {
    reached();
    await released;
    return 'answered';
  });
  await client.call('rpc.ping');
  const sessionId = [...b.gateway.sessions.keys()][0]!;
  const callThroughA = () =>
    post(a.api.url, 'callClient', { sessionId, method: 'held', timeoutMs: CALL_TIMEOUT_MS });
  return { a, b, sessionId, release, called, callThroughA };
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    `a call to a client on a node whose server API closes (${kind})`,
    () => {
      it('in progress: the client answers after the close, and the caller gets its result', async () => {
        const { b, release, called, callThroughA } = await heldOnB(kind);
        const reply = callThroughA();
        await within(called, 'the call to reach the client');
        await within(b.api.close(), "B's server API to close");
        release();
        expect((await within(reply, 'the answer', WAIT_MS)).body).toEqual({
          jsonrpc: '2.0',
          id: 1,
          result: { result: 'answered' },
        });
      });

      it('in progress, cut by the gateway closing: the caller gets -32011 at once', async () => {
        const { b, sessionId, called, callThroughA } = await heldOnB(kind);
        const reply = callThroughA();
        await within(called, 'the call to reach the client');
        await within(b.api.close(), "B's server API to close");
        await within(b.gateway.close(), "B's gateway to close");
        expect((await within(reply, 'the answer', WAIT_MS)).body?.error).toMatchObject({
          code: -32011,
          data: { sessionId, reason: 'session closed' },
        });
      });

      it('made once the server API closed with nothing in progress: the caller gets -32011 at once', async () => {
        const { b, sessionId, callThroughA } = await heldOnB(kind);
        await within(b.api.close(), "B's server API to close");
        expect((await within(callThroughA(), 'the answer', WAIT_MS)).body?.error).toMatchObject({
          code: -32011,
          data: { sessionId, reason: 'server API closed' },
        });
      });

      it('made to a server API started again on the same gateway: the client answers', async () => {
        const { a, b, sessionId, release, called } = await heldOnB(kind);
        await within(b.api.close(), "B's server API to close");
        const again = await startApi(b.gateway);
        apis.push(again);
        release();
        const reply = post(a.api.url, 'callClient', {
          sessionId,
          method: 'held',
          timeoutMs: CALL_TIMEOUT_MS,
        });
        await within(called, 'the call to reach the client');
        expect((await within(reply, 'the answer', WAIT_MS)).body).toEqual({
          jsonrpc: '2.0',
          id: 1,
          result: { result: 'answered' },
        });
      });

      it('made while the closed server API waits for another: the caller gets -32011 at once', async () => {
        const { b, sessionId, release, called, callThroughA } = await heldOnB(kind);
        const first = callThroughA();
        await within(called, 'the call to reach the client');
        await within(b.api.close(), "B's server API to close");
        expect((await within(callThroughA(), 'the answer', WAIT_MS)).body?.error).toMatchObject({
          code: -32011,
          data: { sessionId, reason: 'server API closed' },
        });
        release();
        expect((await within(first, 'the first answer', WAIT_MS)).body).toEqual({
          jsonrpc: '2.0',
          id: 1,
          result: { result: 'answered' },
        });
      });
    },
  );
}
