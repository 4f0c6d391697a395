/**
 * `revokeSession` of a session on a node whose broker link is down (docs/identity.md,
 * Revocation): node A revokes one of node B's sessions while B is cut off from the broker (a TCP
 * relay between B and a private redis-server or nats-server, started here on a free port). The
 * message to B's topic never reaches it; the broker keeps a record of the revoked session for
 * B, and once B's link is back B reads its records and closes the session, 4403 with the reason
 * given, cut to 123 bytes. B's other sessions, and A's, stay open.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitUntil, within } from '../support/waiting.js';

type Kind = 'redis' | 'nats';

const mustRun = process.env['CI'] === 'true';
const has = (program: string): boolean =>
  spawnSync(program, ['--version'], { stdio: 'ignore' }).status === 0;
const programs: Record<Kind, boolean> = {
  redis: has('redis-server'),
  nats: has('nats-server'),
};

const res = new Resources();
const brokers: Broker[] = [];
const relays: TcpRelay[] = [];
const servers: ChildProcess[] = [];
const dirs: string[] = [];
const ports: Partial<Record<Kind, number>> = {};

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
  await Promise.all(relays.splice(0).map((relay) => relay.cut()));
});

afterAll(async () => {
  await Promise.all(servers.splice(0).map((child) => killChild(child)));
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A private redis-server or nats-server (JetStream) on a free port. */
async function startServer(kind: Kind): Promise<number> {
  const port = await freePort();
  let child: ChildProcess;
  if (kind === 'redis') {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
    ];
    child = spawn('redis-server', args, { stdio: 'ignore' });
  } else {
    const dir = await mkdtemp(join(tmpdir(), 'wsrpc-session-relink-nats-'));
    dirs.push(dir);
    child = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir], {
      stdio: 'ignore',
    });
  }
  servers.push(child);
  await waitUntil(
    async () => child.exitCode !== null || (await canConnect(port)),
    `${kind} to listen`,
    15_000,
    20,
  );
  if (child.exitCode !== null) throw new Error(`${kind} server exited with ${child.exitCode}`);
  return port;
}

async function newBroker(kind: Kind, prefix: string, port: number): Promise<Broker> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: `redis://127.0.0.1:${port}`, prefix: `${prefix}:` })
      : await NatsBroker.connect({
          servers: `nats://127.0.0.1:${port}`,
          prefix,
          timeoutMs: 2_000,
          reconnectWaitMs: 50,
        });
  brokers.push(broker);
  return broker;
}

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

/** Node A on the broker, node B through a relay the test cuts. */
async function twoNodes(kind: Kind) {
  const port = ports[kind]!;
  const prefix = `wsrpcsessionrelink${randomBytes(5).toString('hex')}`;
  const relay = new TcpRelay(port);
  relays.push(relay);
  const relayed = await relay.start();
  const brokerB = await newBroker(kind, prefix, relayed);
  const a = await res.gateway(options(await newBroker(kind, prefix, port)));
  const b = await res.gateway(options(brokerB));
  return { a, b, brokerB, relay };
}

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

for (const kind of ['redis', 'nats'] as const) {
  const available = programs[kind];
  describe.skipIf(!available && !mustRun)(
    available
      ? `revokeSession while the session's node is cut off from the broker (${kind})`
      : `revokeSession while the session's node is cut off from the broker (${kind}; no ${kind} server)`,
    () => {
      beforeAll(async () => {
        ports[kind] = await startServer(kind);
      });

      it('closes the revoked sessions on node B, with their reasons, once its link is back', async () => {
        const { a, b, brokerB, relay } = await twoNodes(kind);
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
}
