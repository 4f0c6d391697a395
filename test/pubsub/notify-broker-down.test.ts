/**
 * `notifyUser` and `notifySession` when the broker cannot take the message reject with -32009
 * Broker unavailable (a JsonRpcError, so a handler that returns their promise answers its
 * caller with it), not -32603: an outage can be told from a bug. A real Redis is killed (a
 * private redis-server); the memory broker is closed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, JsonRpcError, MemoryBroker } from '../../src/index.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { Cluster } from '../support/cluster.js';
import { hasProgram, startRedisServer } from '../support/server-processes.js';
import { killChild } from '../support/processes.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { freePort } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const hasRedisServer = hasProgram('redis-server');
const res = new Resources();
const brokers: Broker[] = [];
/** Tracks the private redis-server and removes its keys; never runs a gateway node. */
let cluster: Cluster | undefined;

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  await cluster?.cleanup();
  cluster = undefined;
});

interface Ctx {
  user: string;
}

/** A gateway whose sessions belong to `?user=`, with a `tell` method that returns notifyUser's promise. */
async function gatewayOn(broker: Broker, options: Partial<GatewayOptions<Ctx>> = {}) {
  const running = await res.gateway<Ctx>({
    broker,
    authenticate: ({ query }) => ({ user: query.get('user') ?? 'nobody' }),
    userOf: (context) => context.user,
    ...options,
  });
  running.gateway.method('tell', ([user]: [string]) =>
    running.gateway.notifyUser(user, 'msg', ['hi']),
  );
  running.gateway.method('tellSession', ([id]: [string]) =>
    running.gateway.notifySession(id, 'msg', ['hi']),
  );
  return running;
}

async function expectBrokerUnavailable(promise: Promise<unknown>): Promise<JsonRpcError> {
  const err = await rejectionOf(promise);
  expect(err).toBeInstanceOf(JsonRpcError);
  expect(err).toMatchObject({
    code: ErrorCode.BrokerUnavailable,
    message: 'Broker unavailable: the message was not sent',
  });
  return err as JsonRpcError;
}

for (const userInbox of [false, true]) {
  const mode = userInbox ? 'with userInbox' : 'without userInbox';

  describe(`notifyUser and notifySession while the broker is down (${mode})`, () => {
    it('memory broker closed: both reject -32009, and a handler returning them answers -32009', async () => {
      const broker = new MemoryBroker();
      brokers.push(broker);
      const { gateway, url } = await gatewayOn(broker, { userInbox });
      const client = res.client(`${url}?user=ann`);
      await client.opened();
      await broker.close();

      await expectBrokerUnavailable(gateway.notifyUser('ann', 'msg', [1]));
      // A session of another node is reached through the broker.
      await expectBrokerUnavailable(gateway.notifySession('othernode-1', 'msg', [1]));
      const answered = await expectBrokerUnavailable(client.call('tell', ['ann']));
      expect(answered.data).toBeUndefined();
      await expectBrokerUnavailable(client.call('tellSession', ['othernode-1']));
    });

    it.skipIf(!hasRedisServer && !mustRun)(
      'a real Redis killed: both reject -32009 without the broker address (the cause only with exposeErrorDetails), and a handler returning them answers -32009',
      async () => {
        cluster = new Cluster('', 'redis');
        const port = await freePort();
        const server = await startRedisServer(cluster, port, cluster.tempDir());
        const redisUrl = `redis://127.0.0.1:${port}`;
        cluster.usesRedis(redisUrl);
        const connect = async () => {
          const broker = await RedisBroker.create({
            url: redisUrl,
            prefix: `${cluster!.prefix}:`,
            commandTimeoutMs: 1_000,
            reconnectMaxDelayMs: 100,
          });
          brokers.push(broker);
          return broker;
        };
        const quietBroker = await connect();
        const detailedBroker = await connect();
        const quiet = await gatewayOn(quietBroker, { userInbox });
        const detailed = await gatewayOn(detailedBroker, { userInbox, exposeErrorDetails: true });
        const client = res.client(`${quiet.url}?user=ann`);
        await client.opened();
        await waitUntil(() => quiet.gateway.sessions.size === 1, 'the session');
        const [session] = [...quiet.gateway.sessions.values()];
        // While Redis is up, both reach the session (and the inbox numbers the message).
        const got: unknown[] = [];
        client.notificationsOf('msg').subscribe((params) => got.push(params));
        expect(await detailed.gateway.notifyUser('ann', 'msg', [0])).toBe(
          userInbox ? 1 : undefined,
        );
        expect(await detailed.gateway.notifySession(session!.id, 'msg', [0])).toBe(true);
        await waitUntil(() => got.length === 2, 'both messages while Redis is up');

        await killChild(server);
        await waitUntil(() => !quietBroker.ready && !detailedBroker.ready, 'the brokers to notice');

        const hidden = await expectBrokerUnavailable(quiet.gateway.notifyUser('ann', 'msg', [1]));
        expect(hidden.data).toBeUndefined();
        expect(JSON.stringify(hidden)).not.toContain(String(port));
        const told = await expectBrokerUnavailable(detailed.gateway.notifyUser('ann', 'msg', [1]));
        expect(told.data).toEqual({ reason: expect.stringMatching(/Redis broker unavailable/) });
        // The session lives on the other node: only the broker could take it there.
        await expectBrokerUnavailable(detailed.gateway.notifySession(session!.id, 'msg', [1]));
        // A method that returns the promise answers its caller with the same code.
        const answered = await expectBrokerUnavailable(client.call('tell', ['ann']));
        expect(JSON.stringify(answered)).not.toContain(String(port));
        await expectBrokerUnavailable(client.call('tellSession', [`${detailed.gateway.nodeId}-1`]));
      },
    );
  });
}
