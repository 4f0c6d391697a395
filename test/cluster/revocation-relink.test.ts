/**
 * Revocations made while a node's broker link is down (docs/identity.md, Revocation): node A
 * revokes users while node B is cut off from the broker (a TCP relay between B and a private
 * redis-server or nats-server, started here on a free port). The `$revoke` message never reaches
 * B; once B's link is back, B reads the deny list again for the users it has sessions and HTTP
 * POST exchanges of, and closes those listed (4403 `revoked`, 403 for an exchange), but not the
 * sessions whose credentials were issued after the revocation, nor other users'.
 */
import { afterAll, afterEach, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { postRpc } from '../server/http-post.js';
import { CutLinkNodes } from '../support/cut-broker-link.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

interface Identity {
  user: string;
  /** When the credentials were issued (ms since the epoch). */
  issuedAt: number;
}

/** Credentials in the URL: `?user=<name>&iat=<issuedAt>` (a stand-in for a token's claims). */
const options = (broker: Broker): GatewayOptions<Identity> => ({
  broker,
  authenticate: ({ query }) => {
    const user = query.get('user');
    if (!user) throw new UpgradeRejection(401);
    return { user, issuedAt: Number(query.get('iat') ?? 0) };
  },
  userOf: (context) => context.user,
  identity: { issuedAtOf: (context) => context.issuedAt },
});

const nodes = new CutLinkNodes('wsrpcrelink', options);
const res = nodes.res;

afterEach(() => nodes.cleanup());
afterAll(() => nodes.stop());

function as(url: string, user: string, issuedAt = 1): string {
  return `${url}?user=${encodeURIComponent(user)}&iat=${issuedAt}`;
}

/** `slow.wait` runs until its signal aborts; `started` names the users whose call runs. */
function slowMethod(gateway: Gateway<Identity>): Set<string> {
  const started = new Set<string>();
  gateway.method('slow.wait', (_params, ctx) => {
    started.add(ctx.session.context.user);
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  });
  return started;
}

/** The users of node B's sessions still open, sorted. */
function openUsers(gateway: Gateway<Identity>): string[] {
  return [...gateway.sessions.values()]
    .filter((session) => !session.isClosed)
    .map((session) => session.context.user)
    .sort();
}

nodes.describeEachBroker("revocations while a node's broker link is down", (kind) => {
  it("closes the revoked users' sessions and POST exchanges on node B once its link is back", async () => {
    const { a, b, brokerB, relay } = await nodes.twoNodes(kind);
    const started = slowMethod(b.gateway);
    const ann = await openSocket(res, as(b.url, 'ann'));
    const bob = await openSocket(res, as(b.url, 'bob'));
    // Credentials issued after the revocation: the deny list does not apply to them.
    await openSocket(res, as(b.url, 'ann', Date.now() + 3_600_000));
    await openSocket(res, as(b.url, 'dave'));
    const erin = postRpc(as(`${b.httpUrl}/rpc`, 'erin'), { id: 1, method: 'slow.wait' });
    await waitUntil(() => started.has('erin'), "erin's call to run");
    await waitUntil(() => b.gateway.sessions.size === 4, 'the four sessions on B');
    const closes = [closeOf(ann), closeOf(bob)];

    await relay.cut();
    await waitUntil(() => !brokerB.ready, "node B's broker link to be seen down");
    for (const user of ['ann', 'bob', 'erin']) {
      // Nothing of theirs on A; the message to B is taken by the broker, and lost.
      expect(await a.gateway.revokeUser(user, { reason: `revoked ${user}` })).toBe(0);
    }
    await relay.restore();

    // The deny list keeps no reason: the close says `revoked`.
    for (const close of closes) expect(await close).toEqual({ code: 4403, reason: 'revoked' });
    const answer = await erin;
    expect(answer.status).toBe(403);
    expect(answer.body).toBe('revoked\n');
    // Closed in the same pass as bob's: ann's newer credentials and dave stay.
    expect(openUsers(b.gateway)).toEqual(['ann', 'dave']);
  });
});
