/**
 * Cluster tests: gateway processes (test/cluster/node.ts, bundled with the current src/) on
 * 127.0.0.1 sharing one topic space through a real broker, Redis or NATS JetStream, each test
 * under its own random BROKER_PREFIX. Clients are RpcClients on `ws`. Nodes are SIGKILLed to
 * fail them; every child process is killed and every client closed after each test.
 */
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { freePort } from '../support/network.js';
import { openRawSocket } from '../support/gateway.js';
import { Cluster, buildNodeScript, sequenceProblem } from '../support/cluster.js';
import { REDIS_URL, natsLastSeq, withRedis } from '../support/brokers.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { canConnect, httpGet } from '../support/network.js';
import {
  findNginx,
  hasProgram,
  renderNginxSite,
  startNginx,
  startRedisServer,
} from '../support/server-processes.js';
import { inCi, root } from '../support/environment.js';
import { settle, waitFor } from '../support/waiting.js';
import { sleep } from '../support/promises.js';
import type { BrokerKind } from '../support/brokers.js';
import type { Expected, GatewayNode, Subscriber } from '../support/cluster.js';

const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const hasRedisServer = hasProgram('redis-server');
const nginxBin = findNginx();

const skipRedis = !redisUp && !inCi;
const skipNats = !natsUp && !inCi;
const skipFault = !hasRedisServer && !inCi;
const skipNginx = (!nginxBin || (!redisUp && !natsUp)) && !inCi;
for (const [skip, why] of [
  [skipRedis, 'cluster tests on Redis: nothing listens on 127.0.0.1:6379'],
  [skipNats, 'cluster tests on NATS: nothing listens on 127.0.0.1:4222'],
  [skipFault, 'the Redis fault test: no redis-server binary'],
  [skipNginx, 'the nginx test: no nginx binary (or no broker)'],
] as const) {
  if (skip) console.warn(`Skipping ${why} (CI=true makes this a failure)`);
}

let script = '';
beforeAll(async () => {
  script = (await buildNodeScript()).script;
}, 120_000);
afterAll(() => {
  if (script) rmSync(dirname(script), { recursive: true, force: true });
});

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.cleanup();
  cluster = undefined;
});

/** A cluster for this test; on failure the children's output is printed. */
function startCluster(broker: BrokerKind): Cluster {
  const created = new Cluster(script, broker);
  cluster = created;
  onTestFailed(() => console.error(`cluster ${created.prefix}:\n${created.outputs()}`));
  return created;
}

const range = (from: number, to: number): number[] =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

/** Each subscriber's difference from `expected` (empty when all match, event by event). */
function problems(subscribers: readonly Subscriber[], expected: readonly Expected[]): string[] {
  return subscribers.flatMap((sub) => {
    const problem = sequenceProblem(sub.events, expected);
    const errors = sub.errors.map((err) => `subscription error: ${String(err)}`);
    return [...(problem ? [problem] : []), ...errors].map((p) => `${sub.label}: ${p}`);
  });
}

/** Publish `data` through a client's `feed.publish`; the broker's sequence number. */
async function publish(client: { call(m: string, p?: object): Promise<unknown> }, data: object) {
  const seq = await client.call('feed.publish', data);
  if (typeof seq !== 'number') throw new Error(`feed.publish answered ${JSON.stringify(seq)}`);
  return seq;
}

/** The broker's own count of `feed` messages under the cluster's prefix. */
async function storedLastSeq(cluster: Cluster): Promise<number> {
  if (cluster.broker === 'nats') return natsLastSeq(`${cluster.prefix}_feed`);
  const n = await withRedis(REDIS_URL, (redis) => redis.hget(`${cluster.prefix}:{feed}:meta`, 'n'));
  return Number(n);
}

/** A client's URL list starting at `first`, then the others in order. */
function urlsFrom(nodes: readonly GatewayNode[], first: number): string[] {
  return [...nodes.slice(first), ...nodes.slice(0, first)].map((node) => node.url);
}

function clusterTests(kind: BrokerKind): void {
  it('three nodes: every subscriber on every node gets every message published on any node, seq 1..N in order', async () => {
    const c = startCluster(kind);
    const nodes = await Promise.all(['A', 'B', 'C'].map((name) => c.node(name)));
    const subscribers = nodes.flatMap((node) =>
      [1, 2, 3].map((i) => c.subscriber(`${node.name}${i}`, node.url)),
    );
    await c.subscribersOn(nodes, 3);
    expect(await Promise.all(subscribers.map((sub) => sub.node()))).toEqual(
      nodes.flatMap((node) => [node.name, node.name, node.name]),
    );

    // The three nodes publish at once; the broker numbers the messages in one sequence.
    const perNode = 40;
    const total = nodes.length * perNode;
    const published = new Map<number, object>();
    await Promise.all(
      nodes.map(async (node) => {
        const publisher = c.client(node.url);
        for (let i = 1; i <= perNode; i++) {
          const data = { from: node.name, i };
          published.set(await publish(publisher, data), data);
        }
      }),
    );
    expect([...published.keys()].sort((x, y) => x - y)).toEqual(range(1, total));
    expect(await storedLastSeq(c)).toBe(total);

    const expected = range(1, total).map((seq) => ({ seq, data: published.get(seq) }));
    await settle(() => subscribers.every((sub) => sub.events.length >= total));
    expect(problems(subscribers, expected)).toEqual([]);
  }, 60_000);

  it('a node SIGKILLed mid-stream: its clients resume on the survivors with since; every subscriber has 1..N exactly, no loss, no duplicate', async () => {
    const c = startCluster(kind);
    const nodes = await Promise.all(['A', 'B', 'C'].map((name) => c.node(name)));
    const [survivor, , victim] = nodes as [GatewayNode, GatewayNode, GatewayNode];
    // Every client knows all three URLs, its own node's first.
    const subscribers = nodes.flatMap((node, k) =>
      [1, 2, 3].map((i) => c.subscriber(`${node.name}${i}`, urlsFrom(nodes, k))),
    );
    await c.subscribersOn(nodes, 3);
    expect(await Promise.all(subscribers.map((sub) => sub.node()))).toEqual(
      nodes.flatMap((node) => [node.name, node.name, node.name]),
    );
    const onVictim = subscribers.filter((sub) => sub.label.startsWith(victim.name));
    const elsewhere = subscribers.filter((sub) => !onVictim.includes(sub));

    const publisher = c.client(survivor.url);
    const total = 300;
    const killAfter = 100;
    const published = new Map<number, object>();
    let victimExit: Promise<unknown> | undefined;
    for (let i = 1; i <= total; i++) {
      if (i === 21) {
        // Every client has seen at least one message before the kill: this test is about
        // resuming from a seq (one that has seen none resumes from its position: its own test
        // below).
        await waitFor(() => subscribers.every((sub) => sub.events.length > 0), 'first messages');
      }
      if (i === killAfter + 1) {
        victimExit = new Promise((resolve) => victim.child.once('exit', resolve));
        victim.child.kill('SIGKILL'); // and go on publishing at once
      }
      const data = { i };
      published.set(await publish(publisher, data), data);
      await sleep(2);
    }
    await victimExit;
    expect(victim.child.signalCode).toBe('SIGKILL');
    expect([...published.keys()].sort((x, y) => x - y)).toEqual(range(1, total));

    const expected = range(1, total).map((seq) => ({ seq, data: published.get(seq) }));
    await settle(() => subscribers.every((sub) => sub.events.length >= total), 30_000);
    expect(problems(subscribers, expected)).toEqual([]);

    // The victim's clients went through a reconnect and now sit on a survivor.
    for (const sub of onVictim) {
      expect(sub.states).toEqual(['connecting', 'open', 'reconnecting', 'open']);
      expect(['A', 'B']).toContain(await sub.node());
    }
    for (const sub of elsewhere) expect(sub.states).toEqual(['connecting', 'open']);
  }, 60_000);

  it('resume past the history limit: a gap signal with the exact count, then the retained messages, then live ones', async () => {
    const c = startCluster(kind);
    const history = 5;
    // B's port is reserved but B starts only later: until then the client finds nobody there.
    const portB = await freePort();
    const [a, p] = await Promise.all([c.node('A', { history }), c.node('P', { history })]);
    const urlB = `ws://127.0.0.1:${portB}/rpc`;
    const subscriber = c.subscriber('S', [a.url, urlB]);
    const publisher = c.client(p.url);
    await c.subscribersOn([a], 1);

    const data = (i: number) => ({ i });
    for (let i = 1; i <= 3; i++) expect(await publish(publisher, data(i))).toBe(i);
    await waitFor(() => subscriber.events.length >= 3, 'seq 1..3 on S');

    await new Promise((resolve) => {
      a.child.once('exit', resolve);
      a.child.kill('SIGKILL');
    });
    await waitFor(() => subscriber.client.state === 'reconnecting', 'S to lose its node');
    // 20 more while S is away: history keeps only the last 5 (19..23), 15 are lost to S.
    for (let i = 4; i <= 23; i++) expect(await publish(publisher, data(i))).toBe(i);

    // The wire format of the same resume, on a raw socket.
    const raw = await openRawSocket(p.url);
    c.defer(() => raw.socket.terminate());
    raw.socket.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'subscribe',
        params: ['feed', null, { since: 3 }],
        id: 1,
      }),
    );
    const frames = (await raw.waitFor(7)).map((frame) => JSON.parse(frame) as unknown);
    const id = (frames[0] as { result: string }).result;
    expect(typeof id).toBe('string');
    const message = (seq: number) => ({
      jsonrpc: '2.0',
      method: 'subscription',
      params: { subscription: id, seq, result: data(seq) },
    });
    expect(frames).toEqual([
      { jsonrpc: '2.0', result: id, id: 1 },
      // The gap signal carries the topic's epoch (which numbering the seqs belong to).
      {
        jsonrpc: '2.0',
        method: 'subscription',
        params: { subscription: id, gap: 15, epoch: expect.any(String) },
      },
      ...range(19, 23).map(message),
    ]);

    // S comes back on B and resumes with since: 3.
    const b = await c.node('B', { port: portB, history });
    await c.subscribersOn([b], 1);
    expect(await subscriber.node()).toBe('B');
    // Publishing 24 before the catch-up has been read would evict 19 from the 5-message history
    // (a correct gap of 16): wait until S has the retained messages first.
    await waitFor(() => subscriber.events.length >= 9, 'S to catch up from history on B');
    expect(await publish(publisher, data(24))).toBe(24);
    const expected: Expected[] = [
      ...range(1, 3).map((seq) => ({ seq, data: data(seq) })),
      { gap: 15 },
      ...range(19, 24).map((seq) => ({ seq, data: data(seq) })),
    ];
    await settle(() => subscriber.events.length >= expected.length);
    expect(problems([subscriber], expected)).toEqual([]);
    await raw.waitFor(8);
    expect(JSON.parse(raw.frames[7]!)).toEqual(message(24));
    expect(raw.frames).toHaveLength(8);
  }, 60_000);

  it('a node cut off from the broker while the others publish catches up from history when it returns, before any new message', async () => {
    const c = startCluster(kind);
    // A reaches the broker through a relay the test cuts; B, and the broker itself, carry on.
    const relay = new TcpRelay(kind === 'redis' ? 6379 : 4222);
    c.defer(() => relay.cut());
    const relayPort = await relay.start();
    const viaRelay: Record<string, string> =
      kind === 'redis'
        ? { REDIS_URL: `redis://127.0.0.1:${relayPort}` }
        : { NATS_URL: `nats://127.0.0.1:${relayPort}` };
    const [a, b] = await Promise.all([c.node('A', { env: viaRelay }), c.node('B')]);
    const subscribers = [c.subscriber('subA', a.url), c.subscriber('subB', b.url)];
    await c.subscribersOn([a, b], 1);
    const publisher = c.client(b.url);
    const expected = async (seqs: number[]) => {
      for (const i of seqs) expect(await publish(publisher, { i })).toBe(i);
      return range(1, seqs.at(-1)!).map((seq) => ({ seq, data: { i: seq } }));
    };

    let all = await expected(range(1, 5));
    await settle(() => subscribers.every((sub) => sub.events.length >= 5));
    expect(problems(subscribers, all)).toEqual([]);

    await relay.cut();
    await waitFor(
      async () => (await httpGet(`${a.httpUrl}/readyz`)).status === 503,
      '/readyz 503 on A',
    );
    all = await expected(range(6, 25));
    await settle(() => subscribers[1]!.events.length >= 25);
    expect(problems(subscribers.slice(1), all)).toEqual([]);
    expect(subscribers[0]!.events).toHaveLength(5); // A cannot have heard of them

    await relay.restore();
    await waitFor(
      async () => (await httpGet(`${a.httpUrl}/readyz`)).status === 200,
      '/readyz 200 again on A',
    );
    // Nothing new is published until A's subscriber has 6..25: they can only come from history.
    await settle(() => subscribers[0]!.events.length >= 25);
    expect(problems(subscribers, all)).toEqual([]);
    all = await expected([26]);
    await settle(() => subscribers.every((sub) => sub.events.length >= 26));
    expect(problems(subscribers, all)).toEqual([]);
    for (const sub of subscribers) expect(sub.states).toEqual(['connecting', 'open']);
  }, 60_000);
}

describe.skipIf(skipRedis)(
  skipRedis ? 'cluster on Redis (skipped: no Redis on 127.0.0.1:6379)' : 'cluster on Redis',
  () => {
    clusterTests('redis');

    // A client that has had no message yet resumes from the position the server gave it when
    // it subscribed (`position: true`), so what was published meanwhile is not lost.
    it('a subscriber that has had no message yet, away while messages are published, gets them (or a gap signal) on resume', async () => {
      const c = startCluster('redis');
      const portB = await freePort(); // B starts only once S is away and messages were published
      const [a, p] = await Promise.all([c.node('A'), c.node('P')]);
      const subscriber = c.subscriber('S', [a.url, `ws://127.0.0.1:${portB}/rpc`]);
      const publisher = c.client(p.url);
      await c.subscribersOn([a], 1);
      // Its position read: counted on the server is not yet told (a loss before it is a gap of
      // unknown size: test/client/subscription-model.test.ts).
      await waitFor(() => subscriber.knowsItsStart(), 'S to have its position');
      await new Promise((resolve) => {
        a.child.once('exit', resolve);
        a.child.kill('SIGKILL');
      });
      await waitFor(() => subscriber.client.state === 'reconnecting', 'S to lose its node');
      for (let i = 1; i <= 5; i++) expect(await publish(publisher, { i })).toBe(i);
      const b = await c.node('B', { port: portB });
      await c.subscribersOn([b], 1);
      expect(await publish(publisher, { i: 6 })).toBe(6);
      await waitFor(() => subscriber.events.some((e) => e.seq === 6), 'seq 6 on S');
      // History holds 1..5 (maxLength 1 000): a resume from "nothing seen" would replay them;
      // at the very least the loss must be told with a gap signal.
      const replayed = range(1, 6).map((seq) => ({ seq, data: { i: seq } }));
      const told: Expected[] = [{ gap: 5 }, { seq: 6, data: { i: 6 } }];
      const problem = sequenceProblem(subscriber.events, replayed);
      expect(problem && sequenceProblem(subscriber.events, told) && problem).toBeUndefined();
    }, 60_000);

    it.skipIf(skipFault)(
      skipFault
        ? 'Redis killed and restarted under two gateways (skipped: no redis-server)'
        : 'Redis killed under traffic: gateways stay up, /readyz 503, publishes fail with an error, sessions keep working; restarted: ready again, publishes flow, subscribers get them',
      async () => {
        const c = startCluster('redis');
        const redisPort = await freePort();
        const redisUrl = `redis://127.0.0.1:${redisPort}`;
        const dir = c.tempDir();
        c.usesRedis(redisUrl);
        const redis = await startRedisServer(c, redisPort, dir);
        const env = { REDIS_URL: redisUrl };
        const nodes = await Promise.all([c.node('A', { env }), c.node('B', { env })]);
        const [a, b] = nodes;
        const subscribers = [c.subscriber('subA', a.url), c.subscriber('subB', b.url)];
        await c.subscribersOn(nodes, 1);
        const publisherA = c.client(a.url);
        const publisherB = c.client(b.url);

        // Traffic: A publishes every ~10 ms, each outcome recorded with the phase it started in.
        type Phase = 'before' | 'outage' | 'restarting' | 'after';
        interface Outcome {
          phase: Phase;
          data: { i: number; phase: Phase };
          seq?: number;
          error?: unknown;
        }
        const outcomes: Outcome[] = [];
        let phase: Phase = 'before';
        let running = true;
        const traffic = (async () => {
          for (let i = 1; running; i++) {
            const data = { i, phase };
            try {
              outcomes.push({ phase: data.phase, data, seq: await publish(publisherA, data) });
            } catch (error) {
              outcomes.push({ phase: data.phase, data, error });
            }
            await sleep(10);
          }
        })();
        const count = (p: Phase, ok: boolean) =>
          outcomes.filter((o) => o.phase === p && (o.seq !== undefined) === ok).length;

        await waitFor(() => subscribers.every((sub) => sub.events.length >= 10), 'traffic to flow');
        await new Promise((resolve) => {
          redis.once('exit', resolve);
          redis.kill('SIGKILL');
        });
        phase = 'outage';

        for (const node of nodes) {
          await waitFor(
            async () => (await httpGet(`${node.httpUrl}/readyz`)).status === 503,
            `/readyz 503 on ${node.name}`,
          );
        }
        await waitFor(() => count('outage', false) >= 3, 'publishes to fail during the outage');
        for (const node of nodes) {
          expect({ exitCode: node.child.exitCode, signal: node.child.signalCode }).toEqual({
            exitCode: null,
            signal: null,
          });
          expect((await httpGet(`${node.httpUrl}/livez`)).status).toBe(200);
          expect((await c.info(node)).brokerReady).toBe(false);
        }
        // A publish fails with a JSON-RPC error naming the cause (no hang, no disconnect).
        const failed = await publisherB.call('feed.publish', { marker: 'outage' }).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(failed).toBeInstanceOf(JsonRpcError);
        expect(failed).toMatchObject({
          code: -32009,
          message: 'Broker unavailable: the message was not published',
          data: { topic: 'feed', reason: expect.stringMatching(/Redis broker unavailable/) },
        });
        // Connected sessions still answer.
        expect(await Promise.all(subscribers.map((sub) => sub.node()))).toEqual(['A', 'B']);

        phase = 'restarting';
        await startRedisServer(c, redisPort, dir);
        for (const node of nodes) {
          await waitFor(
            async () => (await httpGet(`${node.httpUrl}/readyz`)).status === 200,
            `/readyz 200 again on ${node.name}`,
          );
        }
        phase = 'after';
        await waitFor(() => count('after', true) >= 5, 'publishes to work again');
        running = false;
        await traffic;
        const marker = { marker: 'from B after the restart' };
        const markerSeq = await publish(publisherB, marker);

        // Every failure was the broker's JSON-RPC error; nothing started after the kill succeeded
        // before the restart, nothing after failed.
        const failures = outcomes.filter((o) => o.error !== undefined);
        for (const { error } of failures) {
          expect(error).toBeInstanceOf(JsonRpcError);
          expect(error).toMatchObject({ code: -32009 });
          expect((error as JsonRpcError).data).toMatchObject({
            reason: expect.stringMatching(/Redis broker unavailable/),
          });
        }
        expect(count('before', true)).toBeGreaterThan(0);
        expect(count('outage', true)).toBe(0);
        expect(count('after', false)).toBe(0);

        // Redis came back empty (no persistence): numbering restarts at 1, and every message
        // published since then reaches both subscribers, once, in order.
        const since = outcomes
          .filter((o) => o.seq !== undefined && (o.phase === 'restarting' || o.phase === 'after'))
          .map((o) => ({ seq: o.seq!, data: o.data as object }));
        since.push({ seq: markerSeq, data: marker });
        since.sort((x, y) => x.seq - y.seq);
        expect(since.map((m) => m.seq)).toEqual(range(1, since.length));
        const isNew = (data: unknown) => {
          const { phase: p, marker: m } = (data ?? {}) as { phase?: Phase; marker?: string };
          return m !== undefined || p === 'restarting' || p === 'after';
        };
        await settle(() =>
          subscribers.every((sub) => sub.events.some((e) => isNew(e.data) && e.seq === markerSeq)),
        );
        for (const sub of subscribers) {
          const received = sub.messages.filter((e) => isNew(e.data));
          expect(sequenceProblem(received, since) ?? 'ok').toBe('ok');
          // Before the kill: in order, no duplicate (the last ones may have died with Redis).
          const earlier = sub.messages.filter((e) => !isNew(e.data)).map((e) => e.seq!);
          expect(earlier.every((seq, k) => k === 0 || seq === earlier[k - 1]! + 1)).toBe(true);
          // The new numbering was announced once, with a gap signal of unknown size, between
          // the last message before the kill and the first one after the restart.
          const gaps = sub.events.flatMap((e, k) => (e.gap === undefined ? [] : [k]));
          expect(gaps.map((k) => sub.events[k]!.gap)).toEqual([null]);
          expect(sub.events.slice(gaps[0]! + 1).every((e) => isNew(e.data))).toBe(true);
          expect(sub.events.slice(0, gaps[0]).every((e) => !isNew(e.data))).toBe(true);
          expect(sub.states).toEqual(['connecting', 'open']);
          expect(sub.errors).toEqual([]);
        }
      },
      60_000,
    );
  },
);

describe.skipIf(skipNats)(
  skipNats
    ? 'cluster on NATS JetStream (skipped: no NATS on 127.0.0.1:4222)'
    : 'cluster on NATS JetStream',
  () => {
    clusterTests('nats');
  },
);

describe.skipIf(skipNginx)(
  skipNginx
    ? 'nginx in front of two gateways (skipped: no nginx, or no Redis or NATS)'
    : 'nginx (deploy/nginx.conf) in front of two gateways',
  () => {
    it('a WebSocket client through nginx calls a method, subscribes, and receives messages published on the other gateway', async () => {
      const c = startCluster(redisUp || !natsUp ? 'redis' : 'nats');
      const nodes = await Promise.all([c.node('A'), c.node('B')]);
      const listen = await freePort();
      const site = renderNginxSite(
        readFileSync(join(root, 'deploy/nginx.conf'), 'utf8'),
        nodes.map((node) => node.port),
        listen,
      );
      expect(site).not.toMatch(/gateway-\d/);
      await startNginx(c, nginxBin ?? 'nginx', c.tempDir(), site, listen);
      const front = `http://127.0.0.1:${listen}`;
      expect((await httpGet(`${front}/readyz`)).status).toBe(200);

      const subscriber = c.subscriber('via nginx', `ws://127.0.0.1:${listen}/rpc`);
      await waitFor(
        () => subscriber.client.state === 'open',
        'the WebSocket upgrade through nginx',
      );
      const name = await subscriber.node(); // a call through nginx
      const here = nodes.find((node) => node.name === name);
      const other = nodes.find((node) => node.name !== name)!;
      expect(here).toBeDefined();
      await c.subscribersOn([here!], 1);

      const publisher = c.client(other.url);
      expect(await publisher.call('node.info')).toMatchObject({ name: other.name });
      const expected: Expected[] = [];
      for (let i = 1; i <= 5; i++) {
        const data = { i, via: other.name };
        expected.push({ seq: await publish(publisher, data), data });
      }
      expect(expected.map((m) => ('seq' in m ? m.seq : 0))).toEqual(range(1, 5));
      await settle(() => subscriber.events.length >= expected.length);
      expect(problems([subscriber], expected)).toEqual([]);
      expect(await canConnect(listen)).toBe(true);
    }, 60_000);
  },
);
