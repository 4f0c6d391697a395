/**
 * Revocation of HTTP POST exchanges in progress (docs/identity.md, Revocation): revokeUser and
 * revokeSession end the exchanges they name on the node that receives them. The handler sees
 * ctx.signal abort, and the caller gets 403 with the reason (the exchange's counterpart of the
 * close 4403); another user's exchange runs on. On real Redis, a revocation made on node A ends
 * an exchange running on node B. Also: HTTP POST refusals count in rpc_rejected_upgrades_total
 * by the upgrade's reasons (capacity, ip-limit, unauthenticated, auth-error).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';
import { postRpc } from './http-post.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const res = new Resources();
const brokers: Broker[] = [];
const prefixes: string[] = [];

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  for (const prefix of prefixes) await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
});

interface Identity {
  user: string;
}

/** `Authorization: Bearer <user>`; the token `fail` makes the hook itself throw. */
const options = (extra: GatewayOptions<Identity> = {}): GatewayOptions<Identity> => ({
  authenticate: ({ headers }) => {
    const token = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
    if (token === 'fail') throw new Error('the hook failed');
    if (!token) throw new UpgradeRejection(401);
    return { user: token };
  },
  userOf: (context) => context.user,
  ...extra,
});

/**
 * `slow.wait` resolves only once ctx.signal aborts (rejecting with the abort); `started` holds
 * the session ids of the calls running, `aborted` those whose signal fired.
 */
function slowMethod(gateway: Gateway<Identity>) {
  const started = new Map<string, string>();
  const aborted: string[] = [];
  gateway.method('slow.wait', (_params, ctx) => {
    started.set(ctx.session.context.user, ctx.session.id);
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        aborted.push(ctx.session.context.user);
        reject(new Error('aborted'));
      });
    });
  });
  gateway.method('quick', () => 'done');
  return { started, aborted };
}

const wait = { id: 1, method: 'slow.wait' };

describe('revoking a user ends its HTTP POST exchanges in progress', () => {
  it("revokeUser aborts the user's running exchange and answers it 403 with the reason; another user's runs on", async () => {
    const { gateway, httpUrl } = await res.gateway(options());
    const { started, aborted } = slowMethod(gateway);
    const carol = postRpc(`${httpUrl}/rpc`, wait, { token: 'carol' });
    const dave = postRpc(`${httpUrl}/rpc`, wait, { token: 'dave' });
    await waitUntil(() => started.size === 2, 'both calls to run');
    expect(await gateway.revokeUser('carol', { reason: 'account suspended' })).toBe(1);
    const answer = await within(carol, "carol's answer");
    expect(answer.status).toBe(403);
    expect(answer.body).toBe('account suspended\n');
    expect(aborted).toEqual(['carol']);
    // Dave's exchange is untouched: still running, answered once it ends.
    const daveId = started.get('dave')!;
    expect(await gateway.revokeSession(daveId, { reason: 'signed out' })).toBe(true);
    const second = await within(dave, "dave's answer");
    expect(second.status).toBe(403);
    expect(second.body).toBe('signed out\n');
    expect(aborted).toEqual(['carol', 'dave']);
    // The exchanges by user hold an entry only while a user has one running.
    const internals = gateway as unknown as { httpRpc: { byUser: Map<string, unknown> } };
    await waitUntil(() => internals.httpRpc.byUser.size === 0, 'the entries to go');
    // Revoked (listed): a new POST by carol is refused at authentication; dave is not listed.
    expect(
      (await postRpc(`${httpUrl}/rpc`, { id: 2, method: 'quick' }, { token: 'carol' })).status,
    ).toBe(401);
    const again = await postRpc(`${httpUrl}/rpc`, { id: 3, method: 'quick' }, { token: 'dave' });
    expect(again.reply).toMatchObject({ result: 'done' });
  });

  it('an exchange authenticated before the revocation whose body arrives after it is refused 401 revoked', async () => {
    const authenticated: string[] = [];
    const base = options();
    const { gateway, httpUrl } = await res.gateway(
      options({
        authenticate: (request) => {
          const context = (base.authenticate as (r: typeof request) => Identity)(request);
          authenticated.push(context.user);
          return context;
        },
      }),
    );
    slowMethod(gateway);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'quick' });
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        `${httpUrl}/rpc`,
        {
          method: 'POST',
          agent: false,
          headers: {
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
            authorization: 'Bearer lena',
          },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.flushHeaders();
      // The body once the user is revoked, after its credentials passed the deny check.
      void waitUntil(() => authenticated.length === 1, 'the authenticate hook')
        .then(() => gateway.revokeUser('lena'))
        .then(() => req.end(body), reject);
    });
    expect(await within(answer, 'the answer')).toEqual({ status: 401, body: 'revoked\n' });
  });

  it('revokeSession of an id that names no running exchange resolves false', async () => {
    const { gateway } = await res.gateway(options());
    expect(await gateway.revokeSession(`${gateway.nodeId}-nosuchsession`)).toBe(false);
  });

  describe.skipIf(!redisUp && !mustRun)(
    redisUp ? 'across nodes (redis)' : 'across nodes (redis; skipped)',
    () => {
      it("revokeUser on node A ends the user's exchange running on node B", async () => {
        const prefix = `wsrpcpostrevoke${randomBytes(5).toString('hex')}`;
        prefixes.push(prefix);
        const node = async () => {
          const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
          brokers.push(broker);
          return res.gateway(options({ broker }));
        };
        const a = await node();
        const b = await node();
        const { started, aborted } = slowMethod(b.gateway);
        const erin = postRpc(`${b.httpUrl}/rpc`, wait, { token: 'erin' });
        const frank = postRpc(`${b.httpUrl}/rpc`, wait, { token: 'frank' });
        await waitUntil(() => started.size === 2, 'both calls to run on node B');
        // Nothing of erin's is on node A.
        expect(await a.gateway.revokeUser('erin', { reason: 'gone' })).toBe(0);
        const answer = await within(erin, "erin's answer");
        expect(answer.status).toBe(403);
        expect(answer.body).toBe('gone\n');
        expect(aborted).toEqual(['erin']);
        // revokeSession on node A, by the id of frank's exchange on node B.
        expect(await a.gateway.revokeSession(started.get('frank')!)).toBe(true);
        expect((await within(frank, "frank's answer")).status).toBe(403);
        expect(aborted).toEqual(['erin', 'frank']);
      });
    },
  );
});

describe('HTTP POST refusals in rpc_rejected_upgrades_total', () => {
  const count = async (httpUrl: string, reason: string): Promise<number> =>
    sampleValue(await scrape(httpUrl), 'rpc_rejected_upgrades_total', { reason }) ?? 0;

  it('counts capacity, ip-limit, unauthenticated, auth-error and user-limit by reason', async () => {
    const { gateway, httpUrl } = await res.gateway(
      options({ limits: { maxConnections: 3, maxConnectionsPerIp: 2, maxConnectionsPerUser: 1 } }),
    );
    const { started } = slowMethod(gateway);
    const url = `${httpUrl}/rpc`;
    // Unauthenticated (401) and a hook that throws (500).
    expect((await postRpc(url, wait)).status).toBe(401);
    expect((await postRpc(url, wait, { token: 'fail' })).status).toBe(500);
    // Two exchanges from 127.0.0.1 hold its two slots (one of them the user's only one).
    const held = [postRpc(url, wait, { token: 'gina' }), postRpc(url, wait, { token: 'hank' })];
    await waitUntil(() => started.size === 2, 'two exchanges to run');
    expect((await postRpc(url, wait, { token: 'ivan' })).status).toBe(429); // ip-limit
    // From another address: the user's limit, then (the third slot taken) capacity.
    expect((await postRpc(url, wait, { token: 'gina', from: '127.0.0.2' })).status).toBe(429);
    const third = postRpc(url, wait, { token: 'jane', from: '127.0.0.3' });
    await waitUntil(() => started.size === 3, 'a third exchange to run');
    expect((await postRpc(url, wait, { token: 'kim', from: '127.0.0.4' })).status).toBe(503);
    expect(await count(httpUrl, 'unauthenticated')).toBe(1);
    expect(await count(httpUrl, 'auth-error')).toBe(1);
    expect(await count(httpUrl, 'ip-limit')).toBe(1);
    expect(await count(httpUrl, 'user-limit')).toBe(1);
    expect(await count(httpUrl, 'capacity')).toBe(1);
    for (const user of ['gina', 'hank', 'jane']) await gateway.revokeUser(user);
    await Promise.all([...held, third]);
  });
});
