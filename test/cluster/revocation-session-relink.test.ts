/**
 * `revokeSession` of a session on a node whose broker link is down (docs/identity.md,
 * Revocation): node A revokes one of node B's sessions while B is cut off from the broker (a TCP
 * relay between B and a private redis-server or nats-server, started here on a free port). The
 * message to B's topic never reaches it; the broker keeps a record of the revoked session for
 * B, and once B's link is back B reads its records and closes the session, 4403 with the reason
 * given, cut to 123 bytes. B's other sessions, and A's, stay open.
 */
import { afterAll, afterEach, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { CutLinkNodes } from '../support/cut-broker-link.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';

/** The user in the URL: `?user=<name>`. */
const options = (broker: Broker): GatewayOptions<{ user: string }> => ({
  broker,
  authenticate: ({ query }) => {
    const user = query.get('user');
    if (!user) throw new UpgradeRejection(401);
    return { user };
  },
  userOf: (context) => context.user,
});

const nodes = new CutLinkNodes('wsrpcsessionrelink', options);
const res = nodes.res;

afterEach(() => nodes.cleanup());
afterAll(() => nodes.stop());

/** The id of `gateway`'s open session of `user`. */
function sessionOf(gateway: Gateway<{ user: string }>, user: string): string {
  const session = [...gateway.sessions.values()].find(
    (s) => !s.isClosed && s.context.user === user,
  );
  if (!session) throw new Error(`no open session of ${user}`);
  return session.id;
}

/** The users of `gateway`'s sessions still open, sorted. */
function openUsers(gateway: Gateway<{ user: string }>): string[] {
  return [...gateway.sessions.values()]
    .filter((session) => !session.isClosed)
    .map((session) => session.context.user)
    .sort();
}

nodes.describeEachBroker(
  "revokeSession while the session's node is cut off from the broker",
  (kind) => {
    it('closes the revoked sessions on node B, with their reasons, once its link is back', async () => {
      const { a, b, brokerB, relay } = await nodes.twoNodes(kind);
      const ann = await openSocket(res, `${b.url}?user=ann`);
      const bob = await openSocket(res, `${b.url}?user=bob`);
      await openSocket(res, `${b.url}?user=cat`);
      await openSocket(res, `${a.url}?user=dan`);
      await waitUntil(() => b.gateway.sessions.size === 3, 'the three sessions on B');
      await waitUntil(() => a.gateway.sessions.size === 1, 'the session on A');
      const closes = [closeOf(ann), closeOf(bob)];
      const long = 'é'.repeat(100);

      await relay.cut();
      await waitUntil(() => !brokerB.ready, "node B's broker link to be seen down");
      // Taken by the broker, and lost on the way to B.
      expect(
        await a.gateway.revokeSession(sessionOf(b.gateway, 'ann'), {
          reason: 'signed out elsewhere',
        }),
      ).toBe(true);
      expect(await a.gateway.revokeSession(sessionOf(b.gateway, 'bob'), { reason: long })).toBe(
        true,
      );
      expect(openUsers(b.gateway)).toEqual(['ann', 'bob', 'cat']);
      await relay.restore();

      expect(await within(closes[0]!, "ann's close")).toEqual({
        code: 4403,
        reason: 'signed out elsewhere',
      });
      // 61 two-byte characters: 122 of the 123 bytes a close reason may hold.
      expect(await within(closes[1]!, "bob's close")).toEqual({
        code: 4403,
        reason: 'é'.repeat(61),
      });
      expect(openUsers(b.gateway)).toEqual(['cat']);
      expect(openUsers(a.gateway)).toEqual(['dan']);
    });
  },
);
