/**
 * A gateway on the Redis broker, seen from a raw WebSocket client: broker outages answered
 * -32009 (retryable) without the broker's address, and resumes whose position belongs to a
 * numbering Redis no longer has. Outages use a private redis-server the test kills; the rest
 * runs on the shared Redis under a random prefix.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, JsonRpcError } from '../../src/index.js';
import { silentLogger } from '../../src/peer/logger.js';
import { RedisBroker, redisTopicKeys } from '../../src/pubsub/redis-broker.js';
import { SessionRouter } from '../../src/server/session-router.js';
import { Resources } from '../support/resources.js';
import { rejectionOf } from '../support/promises.js';
import { deleteRedisKeys, withRedis } from '../support/brokers.js';
import { holdPositionReads } from '../support/held-position.js';
import { canConnect, freePort } from '../support/network.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { killChild } from '../support/processes.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const reachable = await canConnect(6379);
const mustRun = process.env['CI'] === 'true';
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
const prefix = `wsrpc-test-gw:${randomBytes(6).toString('hex')}:`;

const res = new Resources();
const brokers: RedisBroker[] = [];
const children: ChildProcess[] = [];
const dirs: string[] = [];

const kill = (child: ChildProcess) => killChild(child);

afterEach(async () => {
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((b) => b.close()));
  await Promise.all(children.splice(0).map(kill));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

afterAll(async () => {
  if (reachable) await deleteRedisKeys(REDIS_URL, prefix.slice(0, -1));
});

/** A redis-server of the test's own (no persistence), answering on `port`. */
async function startRedis(port: number): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'wsrpc-redis-'));
  dirs.push(dir);
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'].concat([
      '--dir',
      dir,
    ]),
    { stdio: 'ignore' },
  );
  children.push(child);
  const deadline = Date.now() + 15_000;
  while (!(await canConnect(port))) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('redis-server did not listen');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return child;
}

async function broker(url: string): Promise<RedisBroker> {
  const created = await RedisBroker.create({
    url,
    prefix,
    commandTimeoutMs: 1_000,
    reconnectMaxDelayMs: 100,
  });
  brokers.push(created);
  return created;
}

async function raw(url: string): Promise<RawRpc> {
  const client = await RawRpc.open(url);
  res.track(client.socket);
  return client;
}

describe.skipIf(!hasRedisServer && !mustRun)('a Redis outage, seen by clients', () => {
  it('a subscribe while Redis is down answers -32009 (retryable, no broker address), holds nothing, and works once Redis is back', async () => {
    const port = await freePort();
    const server = await startRedis(port);
    const shared = await broker(`redis://127.0.0.1:${port}`);
    const quiet = await res.gateway({ broker: shared });
    const detailed = await res.gateway({ broker: shared, exposeErrorDetails: true });
    for (const { gateway } of [quiet, detailed]) gateway.topic('feed');
    const client = await raw(quiet.url);
    const detailedClient = await raw(detailed.url);

    await kill(server);
    await waitUntil(() => !shared.ready, 'the broker to notice');
    const refused = await client.request('subscribe', ['feed', null, { position: true }]);
    expect(refused.error).toEqual({
      code: ErrorCode.BrokerUnavailable,
      message: 'Broker unavailable: could not subscribe',
      data: { topic: 'feed' },
    });
    expect(JSON.stringify(refused)).not.toContain(String(port));
    expect(quiet.gateway.pubsub.topics()).toEqual({});
    // With exposeErrorDetails the cause is told.
    const told = await detailedClient.request('subscribe', ['feed']);
    expect(told.error).toMatchObject({
      code: ErrorCode.BrokerUnavailable,
      data: { topic: 'feed', reason: expect.stringMatching(/Redis broker unavailable/) },
    });
    expect(detailed.gateway.pubsub.topics()).toEqual({});

    await startRedis(port); // killed in afterEach
    await shared.connect();
    const accepted = await client.request('subscribe', ['feed', null, { position: true }]);
    const id = accepted.result as string;
    expect(typeof id).toBe('string');
    await client.until(() => client.notifications(id).length === 1, 'the position');
    expect(await quiet.gateway.publish('feed', 'back')).toBe(1);
    await client.until(() => client.notifications(id).some((m) => m.seq === 1), 'the message');
    expect(quiet.gateway.pubsub.topics()).toEqual({ feed: 1 });
  });

  it('a publish while Redis is down rejects -32009 naming the topic; the cause only with exposeErrorDetails', async () => {
    const port = await freePort();
    const server = await startRedis(port);
    const shared = await broker(`redis://127.0.0.1:${port}`);
    const quiet = await res.gateway({ broker: shared });
    const detailed = await res.gateway({ broker: shared, exposeErrorDetails: true });
    await kill(server);
    await waitUntil(() => !shared.ready, 'the broker to notice');

    const hidden = await rejectionOf(quiet.gateway.publish('feed', 1));
    expect(hidden).toBeInstanceOf(JsonRpcError);
    expect(hidden).toMatchObject({
      code: ErrorCode.BrokerUnavailable,
      message: 'Broker unavailable: the message was not published',
    });
    expect((hidden as JsonRpcError).data).toEqual({ topic: 'feed' });
    const shown = await rejectionOf(detailed.gateway.publish('feed', 1));
    expect((shown as JsonRpcError).data).toEqual({
      topic: 'feed',
      reason: expect.stringMatching(
        new RegExp(`Redis broker unavailable \\(127\\.0\\.0\\.1:${port}\\)`),
      ),
    });
  });
});

describe.skipIf(!hasRedisServer && !mustRun)('reaching a user after a Redis outage', () => {
  it('a session of a user that opened while Redis was down is reached by notifyUser once Redis is back', async () => {
    const port = await freePort();
    const server = await startRedis(port);
    const url = `redis://127.0.0.1:${port}`;
    const reached: string[] = [];
    // The gateway's router, with the gateway's local sessions reduced to a record.
    const router = new SessionRouter(
      await broker(url),
      'node1',
      {
        notifySession: () => false,
        notifyUser: (user, method) => reached.push(`${user} ${method}`),
      },
      silentLogger,
    );
    await router.start();
    await kill(server);
    await waitUntil(() => !brokers[0]!.ready, 'the broker to notice');
    router.userConnected('frank'); // a session of frank opens now
    expect(await router.listeningFor('frank')).toBe(false);

    await startRedis(port); // killed in afterEach
    // This node listens for frank again, by itself: Redis says so.
    const channel = `${prefix}direct:$user.frank`;
    const admin = new Redis(url);
    try {
      await waitUntil(async () => {
        const reply = (await admin.pubsub('NUMSUB', channel)) as [string, number];
        return reply[1] === 1;
      }, 'the subscription for frank');
    } finally {
      admin.disconnect();
    }
    expect(await router.listeningFor('frank')).toBe(true);
    // Another node notifies frank.
    const other = await broker(url);
    await other.publish('$user.frank', JSON.stringify({ user: 'frank', method: 'hello' }));
    await waitUntil(() => reached.length > 0, 'the message for frank');
    expect(reached).toEqual(['frank hello']);
    await router.stop();
  });
});

describe.skipIf(!reachable && !mustRun)('resuming on Redis when Redis lost the topic', () => {
  it("a since past the topic's last seq (Redis restarted empty, renumbered): gap signal (unknown size), then history from its start", async () => {
    const { gateway, url } = await res.gateway({ broker: await broker(REDIS_URL) });
    const topic = `feed-${randomBytes(4).toString('hex')}`;
    gateway.topic(topic);
    for (let n = 1; n <= 3; n++) await gateway.publish(topic, `new${n}`);
    const client = await raw(url);
    const id = (await client.request('subscribe', [topic, null, { since: 10 }])).result as string;
    await gateway.publish(topic, 'new4');
    await client.until(() => client.notifications(id).some((m) => m.seq === 4), 'the live new4');

    const [gap, ...rest] = client.notifications(id);
    const { epoch } = await gateway.broker.history(topic, 0);
    expect(gap).toEqual({ subscription: id, gap: null, epoch });
    expect(rest.map((m) => [m.seq, m.result])).toEqual([1, 2, 3, 4].map((n) => [n, `new${n}`]));
  });

  it('Redis loses the topic: a live subscriber tracking positions is told (gap, new epoch); one resuming with the old epoch gets the new numbering from its start', async () => {
    const { gateway, url } = await res.gateway({ broker: await broker(REDIS_URL) });
    const topic = `feed-${randomBytes(4).toString('hex')}`;
    gateway.topic(topic);
    await gateway.publish(topic, 'old1');
    const live = await raw(url);
    const plain = await raw(url);
    const liveId = (await live.request('subscribe', [topic, null, { position: true }]))
      .result as string;
    const plainId = (await plain.request('subscribe', [topic])).result as string;
    await live.until(() => live.notifications(liveId).length === 1, 'the position');
    const [position] = live.notifications(liveId);
    const oldEpoch = position!.epoch;
    expect(position).toEqual({ subscription: liveId, seq: 1, epoch: expect.any(String) });
    for (let n = 2; n <= 3; n++) await gateway.publish(topic, `old${n}`);

    // Redis loses the topic (an eviction, a restart without persistence): numbering anew.
    const keys = redisTopicKeys(prefix, topic);
    const admin = new Redis(REDIS_URL);
    try {
      await admin.del(keys.meta, keys.log);
    } finally {
      admin.disconnect();
    }
    for (let n = 1; n <= 5; n++) await gateway.publish(topic, `new${n}`);
    await live.until(() => live.notifications(liveId).some((m) => m.result === 'new5'), 'new5');
    await plain.until(() => plain.notifications(plainId).some((m) => m.result === 'new5'), 'new5');
    const { epoch: newEpoch } = await gateway.broker.history(topic, 0);
    expect(newEpoch).not.toBe(oldEpoch);
    expect(live.notifications(liveId).slice(1)).toEqual([
      { subscription: liveId, seq: 2, result: 'old2' },
      { subscription: liveId, seq: 3, result: 'old3' },
      { subscription: liveId, gap: null, epoch: newEpoch },
      ...[1, 2, 3, 4, 5].map((n) => ({ subscription: liveId, seq: n, result: `new${n}` })),
    ]);
    // A client of the convention that did not ask for positions gets messages only.
    expect(plain.notifications(plainId).map((m) => m.result)).toEqual([
      'old2',
      'old3',
      ...[1, 2, 3, 4, 5].map((n) => `new${n}`),
    ]);

    // A client that saw old1..3 resumes with the old epoch: told, then new1..5 (not new4, new5).
    const resumed = await raw(url);
    const id = (await resumed.request('subscribe', [topic, null, { since: 3, epoch: oldEpoch }]))
      .result as string;
    await gateway.publish(topic, 'new6');
    await resumed.until(() => resumed.notifications(id).some((m) => m.seq === 6), 'new6');
    expect(resumed.notifications(id)).toEqual([
      { subscription: id, gap: null, epoch: newEpoch },
      ...[1, 2, 3, 4, 5, 6].map((n) => ({ subscription: id, seq: n, result: `new${n}` })),
    ]);
  });

  it("Redis loses the topic while a subscriber's position is read: read in the new numbering, it is placed there, with no gap", async () => {
    const redisBroker = await broker(REDIS_URL);
    const reads = holdPositionReads(redisBroker);
    const { gateway, url } = await res.gateway({ broker: redisBroker });
    const topic = `feed-${randomBytes(4).toString('hex')}`;
    gateway.topic(topic);
    // A plain subscriber shows when this node has been handed a message; this node sees the
    // old numbering live.
    const plain = await raw(url);
    const plainId = (await plain.request('subscribe', [topic])).result as string;
    for (let n = 1; n <= 3; n++) await gateway.publish(topic, `old${n}`);
    await plain.until(() => plain.notifications(plainId).length === 3, 'old3 on this node');
    const { epoch: oldEpoch } = await gateway.broker.history(topic, 0);
    const client = await raw(url);
    const id = client.nextId();
    client.send({
      jsonrpc: '2.0',
      method: 'subscribe',
      params: [topic, null, { position: true }],
      id,
    });
    await waitUntil(() => reads.held.length === 1, 'the position read');

    // Redis loses the topic while the read waits; the new numbering's first message reaches
    // this node before the read is made.
    await withRedis(REDIS_URL, (admin) => {
      const keys = redisTopicKeys(prefix, topic);
      return admin.del(keys.meta, keys.log);
    });
    await gateway.publish(topic, 'new1');
    await plain.until(() => plain.notifications(plainId).length === 4, 'new1 on this node');
    reads.release();
    const subscription = (await client.response(id)).result as string;
    await gateway.publish(topic, 'new2');
    await client.until(
      () => client.notifications(subscription).some((m) => m.result === 'new2'),
      'new2',
    );
    const { epoch: newEpoch } = await gateway.broker.history(topic, 0);
    expect(newEpoch).not.toBe(oldEpoch);
    expect(client.notifications(subscription)).toEqual([
      { subscription, seq: 0, epoch: newEpoch },
      { subscription, seq: 1, result: 'new1' },
      { subscription, seq: 2, result: 'new2' },
    ]);
  });
});
