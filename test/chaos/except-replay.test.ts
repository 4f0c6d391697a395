/**
 * A message published `except` a session while that session's resume replay reads history.
 * The session exists and is named, so it must not receive the message: the live copy reaching
 * its node is passed by (Delivery.pass, held as a passed seq while the replay runs), and the
 * replay must not write the copy history holds either. (History replays such a message to a
 * session that resumes from before it later, on a new session; this one was named itself.)
 * The except chaos run (except-chaos.test.ts) meets this when a client that has just
 * reconnected is named in `except` by its new session id while its resubscribe's replay is
 * under way: the chat without echo, sent right after a reconnect, echoed back.
 *
 * A real redis-server or nats-server of the test's own; G, the subscribers' node, reaches it through a relay
 * that holds what G sends (so the replay's history read waits, unanswered) while P, the
 * publishing node, publishes the message except the resuming session. Then the read goes on.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { RawRpc } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';
import { FaultRig, missingBroker } from './fault-rig.js';

const rig = new FaultRig();
const res = rig.res;
afterEach(() => rig.cleanup());

const TOPIC = 'feed';

/** The `i` of every message notification of subscription `id`. */
function received(raw: RawRpc, id: string): number[] {
  return raw
    .notifications(id)
    .filter((n) => 'result' in n)
    .map((n) => (n.result as { i: number }).i);
}

describe.each(['redis', 'nats'] as const)('publish except during a resume (%s)', (kind) => {
  it.skipIf(missingBroker(kind))(
    'a session named in except while its resume replay reads history does not receive the message',
    async () => {
      const { server } = await rig.privateBroker(kind);
      const relay = await rig.relayTo(server.port);
      const prefix = `exceptreplay${randomBytes(4).toString('hex')}`;
      const g = await res.gateway({ broker: await rig.connect(server, prefix, relay.port) });
      const p = await res.gateway({ broker: await rig.connect(server, prefix) });
      for (const { gateway } of [g, p]) {
        gateway.topic(TOPIC);
        gateway.method('whoami', (_params, ctx) => ({ whoami: ctx.session.id }));
      }
      // A subscriber on G keeps the topic subscribed there: the resume below needs only reads.
      const keeper = await res.rawRpc(g.url);
      const keeperId = (await keeper.request('subscribe', [TOPIC, null, { position: true }]))
        .result as string;
      await keeper.until(() => keeper.notifications(keeperId).length > 0, 'the keeper placed');
      for (let i = 1; i <= 3; i++) await p.gateway.publish(TOPIC, { i });
      await keeper.until(() => received(keeper, keeperId).length === 3, 'messages 1-3 at G');
      const { epoch } = await p.gateway.broker.history(TOPIC, 0);

      const resumer = await res.rawRpc(g.url);
      const sessionId = ((await resumer.request('whoami')).result as { whoami: string }).whoami;
      relay.hold();
      const reply = resumer.request('subscribe', [TOPIC, null, { since: 1, epoch }]);
      await waitFor(() => relay.heldText().length > 0, "the resume's history read, held");
      const excepted = await p.gateway.publish(TOPIC, { i: 4 }, { except: sessionId });
      // G has the message live (its subscriber link is not held): the resumer's copy is passed.
      await keeper.until(() => received(keeper, keeperId).includes(4), 'message 4 at G');
      relay.release();
      const id = (await reply).result as string;
      await p.gateway.publish(TOPIC, { i: 5 });
      await resumer.until(() => received(resumer, id).includes(5), 'message 5 at the resumer');

      expect(excepted).toBe(4);
      // 2 and 3 replayed (after since 1), 4 passed by (published except this session), then 5.
      expect(received(resumer, id)).toEqual([2, 3, 5]);
    },
    20_000,
  );
});
