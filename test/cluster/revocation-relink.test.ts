/**
 * Revocations made while a node's broker link is down (docs/identity.md, Revocation): node A
 * revokes users while node B is cut off from the broker (a TCP relay between B and a private
 * redis-server or nats-server, started here on a free port). The `$revoke` message never reaches
 * B; once B's link is back, B reads the deny list again for the users it has sessions and HTTP
 * POST exchanges of, and closes those listed (4403 `revoked`, 403 for an exchange), but not the
 * sessions whose credentials were issued after the revocation, nor other users'.
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
import { postRpc } from '../server/http-post.js';
import { canConnect, freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { Resources } from '../support/resources.js';
import { closeOf, openSocket } from '../support/sockets.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { waitUntil } from '../support/waiting.js';

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
    const dir = await mkdtemp(join(tmpdir(), 'wsrpc-relink-nats-'));
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

/** Node A on the broker, node B through a relay the test cuts. */
async function twoNodes(kind: Kind) {
  const port = ports[kind]!;
  const prefix = `wsrpcrelink${randomBytes(5).toString('hex')}`;
  const relay = new TcpRelay(port);
  relays.push(relay);
  const relayed = await relay.start();
  const brokerB = await newBroker(kind, prefix, relayed);
  const a = await res.gateway(options(await newBroker(kind, prefix, port)));
  const b = await res.gateway(options(brokerB));
  return { a, b, brokerB, relay };
}

/** The users of node B's sessions still open, sorted. */
function openUsers(gateway: Gateway<Identity>): string[] {
  return [...gateway.sessions.values()]
    .filter((session) => !session.isClosed)
    .map((session) => session.context.user)
    .sort();
}

for (const kind of ['redis', 'nats'] as const) {
  const available = programs[kind];
  describe.skipIf(!available && !mustRun)(
    available
      ? `revocations while a node's broker link is down (${kind})`
      : `revocations while a node's broker link is down (${kind}; no ${kind} server)`,
    () => {
      beforeAll(async () => {
        ports[kind] = await startServer(kind);
      });

      it("closes the revoked users' sessions and POST exchanges on node B once its link is back", async () => {
        const { a, b, brokerB, relay } = await twoNodes(kind);
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
    },
  );
}
