/**
 * A user revoked while one of its connections is being admitted: the deny check has passed, and
 * the node waits for the broker's subscription to the user ($user.<name>, holdUser) before the
 * session opens. The revocation reaching that node then finds no session of the user to close,
 * so the session must be refused once the hold is done: 401 `revoked` at the upgrade; in-band,
 * -32010 `revoked` and a 4403 close. Credentials issued after the revocation are let in, as the
 * deny list lets them.
 *
 * Node B reaches Redis through a relay that holds B's SUBSCRIBE for the user (and whatever B
 * sends after it on that connection) until the test lets it go: the revocation lands inside the
 * wait every time. Both nodes in this process, each with its own broker connection.
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { WebSocket } from 'ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { closeOf, openRaw, openSocket } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const res = new Resources();
const brokers: Broker[] = [];
const relays: HoldingRelay[] = [];
const prefixes: string[] = [];

afterEach(async () => {
  await res.cleanup();
  for (const relay of relays) relay.release();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
  await Promise.all(relays.splice(0).map((relay) => relay.close()));
});

afterAll(async () => {
  for (const prefix of prefixes) await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
});

/**
 * A TCP relay to Redis that, once `holdWhen` is armed, holds what a connection sends to Redis
 * from its first chunk that matches (included) until `release()`; Redis's side is never held.
 */
class HoldingRelay {
  port = 0;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private match: ((chunk: string) => boolean) | undefined;
  private caught: (() => void) | undefined;
  private readonly held: (() => void)[] = [];
  private holding = false;

  constructor() {
    this.server = createServer((inbound) => {
      const outbound = connect({ host: '127.0.0.1', port: 6379 });
      let heldHere = false;
      for (const socket of [inbound, outbound]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => {
          this.sockets.delete(socket);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.on('data', (chunk: Buffer) => {
        if (!heldHere && this.match?.(chunk.toString('latin1'))) {
          heldHere = true;
          this.holding = true;
          this.match = undefined;
          this.caught?.();
        }
        if (heldHere && this.holding) this.held.push(() => outbound.write(chunk));
        else outbound.write(chunk);
      });
      outbound.pipe(inbound);
    });
  }

  async start(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    const address = this.server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    return this.port;
  }

  /** Resolves once a chunk matching `match` is held. */
  holdWhen(match: (chunk: string) => boolean): Promise<void> {
    const caught = deferred();
    this.match = match;
    this.caught = () => caught.resolve();
    return caught.promise;
  }

  /** Send what is held, in order, and relay as usual from now on. */
  release(): void {
    this.holding = false;
    for (const write of this.held.splice(0)) write();
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

interface Identity {
  user: string;
  /** When the credentials were issued (ms since the epoch). */
  issuedAt: number;
}

/**
 * Credentials `<user>:<issuedAt>`: the upgrade's `?as=` (a stand-in for a token's claims), or
 * the in-band token. With `inBand`, a connection without `?as=` authenticates in-band.
 */
const options = (broker: Broker, inBand: boolean): GatewayOptions<Identity> => ({
  broker,
  authenticate: ({ query, token }) => {
    const [user, issuedAt] = (token ?? query.get('as') ?? '').split(':');
    if (!user) throw new UpgradeRejection(401);
    return { user, issuedAt: Number(issuedAt ?? 0) };
  },
  userOf: (context) => context.user,
  identity: { inBand, issuedAtOf: (context) => context.issuedAt },
});

/** Node A on Redis, node B on Redis through a HoldingRelay; `sam` has a session on B. */
async function twoNodes(inBand = false) {
  const prefix = `wsrpcrevadm${randomBytes(5).toString('hex')}`;
  prefixes.push(prefix);
  const relay = new HoldingRelay();
  relays.push(relay);
  const port = await relay.start();
  const brokerA = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
  brokers.push(brokerA);
  const brokerB = await RedisBroker.create({
    url: `redis://127.0.0.1:${port}`,
    prefix: `${prefix}:`,
  });
  brokers.push(brokerB);
  const a = await res.gateway(options(brokerA, inBand));
  const b = await res.gateway(options(brokerB, inBand));
  const sentinel = await openRaw(res, inBand ? b.url : `${b.url}?as=sam:1`);
  if (inBand) await sentinel.request('rpc.authenticate', { token: 'sam:1' });
  await waitUntil(() => b.gateway.sessions.size === 1, "sam's session on B");
  /**
   * Resolves once node B has handled every message node A published before: A's last publish,
   * a notification to sam on B, comes to B on the connection that brings `$revoke`, after it.
   */
  const caughtUp = async (): Promise<void> => {
    const seen = sentinel.frames.length;
    const method = `mark.${randomBytes(3).toString('hex')}`;
    await a.gateway.notifyUser('sam', method);
    await sentinel.until(
      () => sentinel.frames.slice(seen).some((frame) => frame.method === method),
      'the mark on B',
    );
  };
  /** Resolves once B sends the SUBSCRIBE for `user`'s messages, held from then on. */
  const holdSubscribe = (user: string): Promise<void> =>
    relay.holdWhen((chunk) => /subscribe/i.test(chunk) && chunk.includes(`$user.${user}`));
  return { a, b, relay, caughtUp, holdSubscribe };
}

/** An upgrade's outcome: 'open', or the status and body that refused it. */
function upgrade(url: string): Promise<'open' | { status: number; body: string }> {
  const socket = res.track(new WebSocket(url));
  return new Promise((resolve) => {
    socket.on('error', () => undefined);
    socket.once('open', () => resolve('open'));
    socket.once('unexpected-response', (_req, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => {
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
        socket.terminate();
      });
    });
  });
}

describe.skipIf(!redisUp && !mustRun)(
  redisUp ? 'revocation during admission (redis)' : 'revocation during admission (redis; skipped)',
  () => {
    it('revoked on another node while B waits for the subscription: the upgrade is refused 401 revoked', async () => {
      const { a, b, relay, caughtUp, holdSubscribe } = await twoNodes();
      const held = holdSubscribe('mallory');
      const outcome = upgrade(`${b.url}?as=mallory:1`);
      await within(held, "B's subscribe for mallory");
      expect(await a.gateway.revokeUser('mallory', { reason: 'suspended' })).toBe(0);
      await caughtUp();
      relay.release();
      expect(await within(outcome, 'the upgrade')).toEqual({ status: 401, body: 'revoked\n' });
      expect([...b.gateway.sessions.values()].map((session) => session.user)).toEqual(['sam']);
    });

    it('revoked on the same node while it waits for the subscription: the upgrade is refused 401 revoked', async () => {
      const { b, relay, holdSubscribe } = await twoNodes();
      const held = holdSubscribe('mallory');
      const outcome = upgrade(`${b.url}?as=mallory:1`);
      await within(held, "B's subscribe for mallory");
      expect(await b.gateway.revokeUser('mallory')).toBe(0);
      relay.release();
      expect(await within(outcome, 'the upgrade')).toEqual({ status: 401, body: 'revoked\n' });
      expect([...b.gateway.sessions.values()].map((session) => session.user)).toEqual(['sam']);
    });

    it('credentials issued after the revocation are let in, revocation or not during the wait', async () => {
      const { a, b, relay, caughtUp, holdSubscribe } = await twoNodes();
      const held = holdSubscribe('mallory');
      const outcome = upgrade(`${b.url}?as=mallory:${Date.now() + 3_600_000}`);
      await within(held, "B's subscribe for mallory");
      await a.gateway.revokeUser('mallory');
      await caughtUp();
      relay.release();
      expect(await within(outcome, 'the upgrade')).toBe('open');
      await waitUntil(() => b.gateway.sessions.size === 2, "mallory's session on B");
    });

    it('revoked while an in-band rpc.authenticate waits for the subscription: refused -32010 revoked, closed 4403, never authenticated', async () => {
      const { a, b, relay, caughtUp, holdSubscribe } = await twoNodes(true);
      const held = holdSubscribe('mallory');
      const pending = await openRaw(res, b.url);
      const closed = closeOf(pending.socket);
      pending.send({
        jsonrpc: '2.0',
        id: 1,
        method: 'rpc.authenticate',
        params: { token: 'mallory:1' },
      });
      await within(held, "B's subscribe for mallory");
      expect(await a.gateway.revokeUser('mallory', { reason: 'suspended' })).toBe(0);
      await caughtUp();
      relay.release();
      expect(await within(closed, 'the close')).toEqual({ code: 4403, reason: 'revoked' });
      expect(pending.frames.filter((frame) => frame.id === 1)).toEqual([
        {
          jsonrpc: '2.0',
          id: 1,
          error: { code: -32010, message: 'revoked', data: { reason: 'revoked', status: 401 } },
        },
      ]);
      expect([...b.gateway.sessions.values()].map((session) => session.user)).toEqual(['sam']);
    });

    it('a fresh connection of the user after the revocation is still refused by the deny list', async () => {
      const { a, b } = await twoNodes();
      const closed = closeOf(await openSocket(res, `${b.url}?as=mallory:1`));
      await a.gateway.revokeUser('mallory');
      expect((await within(closed, 'the close')).code).toBe(4403);
      expect(await upgrade(`${b.url}?as=mallory:1`)).toEqual({ status: 401, body: 'revoked\n' });
    });
  },
);
