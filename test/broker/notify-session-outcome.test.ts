/**
 * What `notifySession` to a session on another node is told when the broker fails under it:
 *   - the message went to the broker, which passed it on, but its answer was lost (the node's
 *     broker connection dropped before the answer came back): -32009 "the message may have been
 *     sent", and the session does get it;
 *   - the node's broker link was down: -32009 "the message was not sent", and the session never
 *     gets it.
 * A private broker process (FaultRig); node A's broker client runs through a relay that loses
 * the answer to one command (TcpRelay.loseAnswerTo) or is cut; the session is on node B.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, JsonRpcError } from '../../src/index.js';
import { PublishUnconfirmedError } from '../../src/pubsub/index.js';
import { FaultRig, missingBroker } from '../chaos/fault-rig.js';
import { waitFor } from '../support/waiting.js';

const rig = new FaultRig();
afterEach(() => rig.cleanup());

/** How a notifySession ended: delivered here or handed on (true), or the JSON-RPC error. */
async function outcome(
  call: Promise<boolean>,
): Promise<boolean | { code: number; message: string }> {
  try {
    return await call;
  } catch (err) {
    if (!(err instanceof JsonRpcError)) throw err;
    return { code: err.code, message: err.message };
  }
}

describe.each(['redis', 'nats'] as const)('notifySession to another node (%s)', (kind) => {
  it.skipIf(missingBroker(kind))(
    'an answer lost: told the message may have been sent, and the session gets it; a link down: told it was not, and it never comes',
    async () => {
      const { server } = await rig.privateBroker(kind);
      const relay = await rig.relayTo(server.port);
      const prefix = `wsrpcnotify${randomBytes(4).toString('hex')}`;
      const brokerA = await rig.connect(server, prefix, relay.port);
      const a = await rig.res.gateway({ broker: brokerA });
      const b = await rig.res.gateway({ broker: await rig.connect(server, prefix) });
      const client = rig.res.client(b.url);
      const got: unknown[] = [];
      client.notificationsOf('hello').subscribe((params) => got.push(params));
      await client.opened();
      const [sessionId] = [...b.gateway.sessions.keys()];

      expect(await a.gateway.notifySession(sessionId!, 'hello', { n: 1 })).toBe(true);
      await waitFor(() => got.length === 1, 'the first message at the session');

      // The command carrying `{"n":2}` reaches the broker; its answer never comes back to A.
      relay.loseAnswerTo(`"n":2}`);
      const lost = await outcome(a.gateway.notifySession(sessionId!, 'hello', { n: 2 }));
      if (kind === 'redis') {
        expect(relay.lost).toBe(1);
        expect(lost).toEqual({
          code: ErrorCode.BrokerUnavailable,
          message: 'Broker unavailable: the message may have been sent',
        });
      } else {
        // A NATS publish has no answer to lose: it was handed on.
        expect(lost).toBe(true);
      }
      await waitFor(() => got.length === 2, 'the message whose answer was lost, at the session');

      // A's link is down: nothing reaches the broker.
      await waitFor(() => brokerA.ready, 'A linked to the broker again');
      await relay.cut();
      await waitFor(() => !brokerA.ready, 'A to notice its link is down');
      expect(await outcome(a.gateway.notifySession(sessionId!, 'hello', { n: 3 }))).toEqual({
        code: ErrorCode.BrokerUnavailable,
        message: 'Broker unavailable: the message was not sent',
      });
      await relay.restore();
      await waitFor(() => brokerA.ready, 'A linked to the broker again');
      expect(await a.gateway.notifySession(sessionId!, 'hello', { n: 4 })).toBe(true);
      await waitFor(() => got.length === 3, 'the last message at the session');
      expect(got).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
    },
    30_000,
  );
});

describe('RedisBroker, a message to a node or a user', () => {
  it.skipIf(missingBroker('redis'))(
    'a PUBLISH whose answer was lost rejects PublishUnconfirmedError; one refused before it was sent does not',
    async () => {
      const { server } = await rig.privateBroker('redis');
      const relay = await rig.relayTo(server.port);
      const broker = await rig.connect(
        server,
        `wsrpcdirect${randomBytes(4).toString('hex')}`,
        relay.port,
      );
      relay.loseAnswerTo('"lost"');
      const lost = await broker.publish('$user:alice', '"lost"').catch((err: unknown) => err);
      expect(relay.lost).toBe(1);
      expect(lost).toBeInstanceOf(PublishUnconfirmedError);
      await waitFor(() => broker.ready, 'linked again');
      await relay.cut();
      await waitFor(() => !broker.ready, 'the link down noticed');
      const refused = await broker.publish('$user:alice', '"refused"').catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(Error);
      expect(refused).not.toBeInstanceOf(PublishUnconfirmedError);
    },
    30_000,
  );
});
