/**
 * Revocation across nodes (gateway.revokeUser, gateway.revokeSession), on real Redis and NATS:
 * two gateways in this process, each with its own broker connection (two nodes). A user's
 * sessions close with 4403 and the reason on whichever node they are; the user's credentials
 * are refused (HTTP 401) while listed, and accepted once the listing lapses, or at once when
 * issued after the revocation (identity.issuedAtOf). With the broker cut, revoking rejects
 * with -32009 rather than hang, and authenticating fails closed (503).
 */
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { NATS_URL, REDIS_URL, deleteNatsStreams, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import {
  attemptUpgrade,
  closeOf,
  openRaw,
  openSocket,
  upgradeRefusal,
} from '../support/sockets.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitFor, waitUntil, within } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers: Broker[] = [];
const relays: TcpRelay[] = [];
const prefixes: { kind: Kind; prefix: string }[] = [];

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
  await Promise.all(relays.splice(0).map((relay) => relay.cut()));
});

afterAll(async () => {
  for (const { kind, prefix } of prefixes) {
    if (kind === 'redis') await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
    else await deleteNatsStreams(prefix).catch(() => 0);
  }
});

type Kind = 'redis' | 'nats';

interface Identity {
  user: string;
  /** When the credentials were issued (ms since the epoch). */
  issuedAt: number;
}

async function newBroker(kind: Kind, prefix: string, port?: number): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({
          url: port ? `redis://127.0.0.1:${port}` : REDIS_URL,
          prefix: `${prefix}:`,
        })
      : await NatsBroker.connect({
          servers: port ? `nats://127.0.0.1:${port}` : NATS_URL,
          prefix,
          timeoutMs: 2_000,
        });
  brokers.push(broker);
  return broker;
}

function newPrefix(kind: Kind): string {
  const prefix = `wsrpcrevoke${randomBytes(5).toString('hex')}`;
  prefixes.push({ kind, prefix });
  return prefix;
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

async function twoNodes(kind: Kind) {
  const prefix = newPrefix(kind);
  const a = await res.gateway(options(await newBroker(kind, prefix)));
  const b = await res.gateway(options(await newBroker(kind, prefix)));
  return [a, b] as const;
}

function as(url: string, user: string, issuedAt = 1): string {
  return `${url}?user=${encodeURIComponent(user)}&iat=${issuedAt}`;
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(
    up ? `revocation across nodes (${kind})` : `revocation across nodes (${kind}; skipped)`,
    () => {
      it("revokeUser on node A closes the user's sessions on both nodes with 4403 and the reason, and no one else's", async () => {
        const [a, b] = await twoNodes(kind);
        const onA = await openSocket(res, as(a.url, 'carol'));
        const onB = await openSocket(res, as(b.url, 'carol'));
        const other = await openSocket(res, as(b.url, 'dave'));
        const closes = [closeOf(onA), closeOf(onB)];
        expect(await a.gateway.revokeUser('carol', { reason: 'account suspended' })).toBe(1);
        for (const close of closes) {
          expect(await within(close, 'a close')).toEqual({
            code: 4403,
            reason: 'account suspended',
          });
        }
        await sleep(100);
        expect(other.readyState).toBe(WebSocket.OPEN);
        expect(b.gateway.sessions.size).toBe(1);
      });

      it('while listed the same credentials are refused (401) on every node; accepted once denyForMs passed, and at once when issued after the revocation', async () => {
        const [a, b] = await twoNodes(kind);
        const onB = await openSocket(res, as(b.url, 'erin', 1_000));
        const closed = closeOf(onB);
        await a.gateway.revokeUser('erin', { denyForMs: 1_500 });
        expect((await within(closed, 'the close')).code).toBe(4403);
        for (const node of [a, b]) {
          const refusal = await upgradeRefusal(res, as(node.url, 'erin', 1_000));
          expect(refusal.status).toBe(401);
          expect(refusal.body.trim()).toBe('revoked');
        }
        // Credentials issued after the revocation are not on the list.
        await sleep(5);
        expect(await attemptUpgrade(res, as(b.url, 'erin', Date.now()))).toBe('open');
        // Another user was never listed.
        expect(await attemptUpgrade(res, as(a.url, 'frank', 1_000))).toBe('open');
        await waitFor(
          async () => (await attemptUpgrade(res, as(a.url, 'erin', 1_000))) === 'open',
          'the listing to lapse',
          5_000,
        );
        expect(await attemptUpgrade(res, as(b.url, 'erin', 1_000))).toBe('open');
      });

      it('in-band authentication and refresh of a listed user are refused with -32010 revoked', async () => {
        const prefix = newPrefix(kind);
        const inBand = (broker: Broker): GatewayOptions<Identity> => ({
          ...options(broker),
          authenticate: ({ token, query }) => {
            const [user, issuedAt] = (token ?? `${query.get('user')}:1`).split(':');
            if (!user || user === 'null') throw new UpgradeRejection(401);
            return { user, issuedAt: Number(issuedAt) };
          },
          identity: { inBand: true, issuedAtOf: (context) => context.issuedAt },
        });
        const a = await res.gateway(inBand(await newBroker(kind, prefix)));
        const b = await res.gateway(inBand(await newBroker(kind, prefix)));
        // A session that authenticated in-band with credentials issued after the revocation.
        const live = await openRaw(res, b.url);
        await a.gateway.revokeUser('kate', { denyForMs: 60_000 });
        await sleep(5);
        const fresh = await live.request('rpc.authenticate', { token: `kate:${Date.now()}` });
        expect(fresh.result).toMatchObject({ user: 'kate' });
        const pending = await openRaw(res, b.url);
        const refused = await pending.request('rpc.authenticate', { token: 'kate:1' });
        expect(refused.error).toMatchObject({ code: -32010, data: { reason: 'revoked' } });
        // A refresh with the old credentials is refused; the session keeps its identity.
        const refresh = await live.request('rpc.authenticate', { token: 'kate:1' });
        expect(refresh.error).toMatchObject({ code: -32010, data: { reason: 'revoked' } });
        expect(live.socket.readyState).toBe(WebSocket.OPEN);
      });

      it('revokeSession on node A closes only that session on node B, and lists nobody', async () => {
        const [a, b] = await twoNodes(kind);
        const first = await openSocket(res, as(b.url, 'gina'));
        await waitUntil(() => b.gateway.sessions.size === 1, 'the first session');
        const [session] = [...b.gateway.sessions.values()];
        const second = await openSocket(res, as(b.url, 'gina'));
        const closed = closeOf(first);
        expect(await a.gateway.revokeSession(session!.id, { reason: 'signed out' })).toBe(true);
        expect(await within(closed, 'the close')).toEqual({ code: 4403, reason: 'signed out' });
        await sleep(100);
        expect(second.readyState).toBe(WebSocket.OPEN);
        expect(await attemptUpgrade(res, as(a.url, 'gina'))).toBe('open');
        // An id naming no node at all.
        expect(await a.gateway.revokeSession('nosuchnode')).toBe(false);
      });

      it('with the broker cut while revoking: revokeUser rejects with -32009 (no hang), the local sessions close, and authenticating fails closed with 503', async () => {
        const relay = new TcpRelay(kind === 'redis' ? 6379 : 4222);
        relays.push(relay);
        const port = await relay.start();
        const broker = await newBroker(kind, newPrefix(kind), port);
        const node = await res.gateway({ ...options(broker), refuseWhileBrokerDown: false });
        const socket = await openSocket(res, as(node.url, 'hank'));
        const closed = closeOf(socket);
        await relay.cut();
        await waitUntil(() => !broker.ready, 'the broker to be seen down');
        // No hang: the relay stays cut until after, so settling cannot be a wait for the broker's
        // return; nor for a command timeout (2 000 ms, both brokers): a timer as long, started
        // first, fires after it would, and has not fired when revokeUser settles.
        let commandTimeoutReached = false;
        const sentinel = setTimeout(() => (commandTimeoutReached = true), 2_000);
        const outcome = await within(
          node.gateway.revokeUser('hank', { reason: 'stolen token' }).then(
            () => undefined,
            (err: unknown) => err,
          ),
          'revokeUser to settle',
        );
        expect(outcome).toMatchObject({
          code: -32009,
          message: 'Broker unavailable: the user was not revoked',
          data: { user: 'hank' },
        });
        expect(commandTimeoutReached).toBe(false);
        clearTimeout(sentinel);
        expect(await within(closed, 'the close')).toEqual({ code: 4403, reason: 'stolen token' });
        const refusal = await upgradeRefusal(res, as(node.url, 'ivan'));
        expect(refusal.status).toBe(503);
        expect(refusal.body.trim()).toBe('Revocation check unavailable');
        expect(refusal.headers['retry-after']).toBe('1');
        await relay.restore();
        await waitFor(
          async () => (await attemptUpgrade(res, as(node.url, 'ivan'))) === 'open',
          'authentication to work again',
          15_000,
        );
      });
    },
  );
}
