/**
 * The server API across two gateways sharing Redis, and sharing NATS (two nodes in this process,
 * each with its own broker connection and its own API listener): a call to a client connected to
 * the other node is answered (by session and by user), subscribers are counted on both nodes,
 * and a publish retried with its idempotency key through the other node lands once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { TestBrokers } from '../support/brokers.js';
import type { BrokerKind as Kind } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { asUser, call, post, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new Resources();
const brokers = new TestBrokers();
const apis: ServerApi[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
  await brokers.closeAll();
});

afterAll(() => brokers.deleteAll());

async function twoNodes(kind: Kind) {
  const prefix = brokers.prefix(kind, 'wsrpcapi');
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const running = await res.gateway(userOptions(await brokers.open(kind, prefix)));
    running.gateway.topic('news');
    const api = await startApi(running.gateway);
    apis.push(api);
    nodes.push({ ...running, api });
  }
  return nodes as [(typeof nodes)[0], (typeof nodes)[0]];
}

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(`server API across nodes (${kind})`, () => {
    it('callClient through one node reaches a session on the other, by session and by user', async () => {
      const [a, b] = await twoNodes(kind);
      const onA = res.client(asUser(a.url, 'ann'));
      onA.method('where', () => 'a');
      const onB = res.client(asUser(b.url, 'ann'));
      onB.method('where', () => 'b');
      onB.method('slow', () => sleep(2_000));
      onB.method('slowish', async () => {
        await sleep(1_000);
        return 'b, later';
      });
      await Promise.all([onA.call('rpc.ping'), onB.call('rpc.ping')]);
      const sessionOnB = [...b.gateway.sessions.keys()][0]!;
      expect(
        await call(a.api.url, 'callClient', { sessionId: sessionOnB, method: 'where' }),
      ).toEqual({
        result: 'b',
      });
      const missing = await post(a.api.url, 'callClient', {
        sessionId: sessionOnB,
        method: 'nope',
      });
      expect(missing.body?.error?.code).toBe(-32601);
      const slow = await post(a.api.url, 'callClient', {
        sessionId: sessionOnB,
        method: 'slow',
        timeoutMs: 200,
      });
      expect(slow.body?.error?.code).toBe(-32012);
      const gone = await post(a.api.url, 'callClient', {
        sessionId: `${b.gateway.nodeId}-nobody`,
        method: 'where',
      });
      expect(gone.body?.error).toMatchObject({ code: -32602, data: { field: 'sessionId' } });
      // An id naming no node: no node says it has the session within countWindowMs, so the
      // call ends then, not after its timeout (holding a slot of the shared table meanwhile).
      const ghost = await post(a.api.url, 'callClient', {
        sessionId: 'ghostnode-AAAAAAAAAAAAAAAAAAAAAA',
        method: 'where',
        timeoutMs: 60_000,
      });
      expect(ghost.body?.error).toMatchObject({ code: -32602, data: { field: 'sessionId' } });
      // A client that answers after the window is still waited for: its node said it has it.
      expect(
        await call(a.api.url, 'callClient', {
          sessionId: sessionOnB,
          method: 'slowish',
          timeoutMs: 10_000,
        }),
      ).toEqual({ result: 'b, later' });
      const byUser = await call<{ results: { sessionId: string; result: string }[] }>(
        a.api.url,
        'callClient',
        {
          user: 'ann',
          method: 'where',
        },
      );
      expect(byUser.results.map((r) => r.result).sort()).toEqual(['a', 'b']);
    });

    it('subscribers counts the subscribers of both nodes', async () => {
      const [a, b] = await twoNodes(kind);
      res.client(a.url).subscribe('news').subscribe();
      res.client(b.url).subscribe('news').subscribe();
      res.client(b.url).subscribe('news').subscribe();
      await waitFor(
        async () =>
          JSON.stringify(await call(a.api.url, 'subscribers', { topic: 'news' })) ===
          JSON.stringify({ count: 3, nodes: 2 }),
        'three subscribers on two nodes',
      );
      expect(await call(b.api.url, 'subscribers', { topic: 'news' })).toEqual({
        count: 3,
        nodes: 2,
      });
    });

    it('a publish retried through the other node with its key lands once', async () => {
      const [a, b] = await twoNodes(kind);
      const client = res.client(b.url);
      const seen: unknown[] = [];
      client.subscribe('news').subscribe((data) => seen.push(data));
      await waitFor(
        async () =>
          (await call<{ count: number }>(a.api.url, 'subscribers', { topic: 'news' })).count === 1,
        'the subscription',
      );
      const params = {
        topic: 'news',
        data: 'once',
        idempotencyKey: randomBytes(8).toString('hex'),
      };
      const results = await Promise.all([
        call(a.api.url, 'publish', params),
        call(b.api.url, 'publish', params),
        call(a.api.url, 'publish', params),
      ]);
      const late = await call(b.api.url, 'publish', params);
      const seqs = new Set([...results, late].map((r) => r['seq']));
      expect(seqs.size).toBe(1);
      expect([...results, late].filter((r) => r['duplicate'] === false)).toHaveLength(1);
      await call(a.api.url, 'publish', { topic: 'news', data: 'after' });
      await waitFor(() => seen.length === 2, 'two messages');
      expect(seen).toEqual(['once', 'after']);
      const history = await call<{ messages: unknown[] }>(b.api.url, 'history', { topic: 'news' });
      expect(history.messages).toHaveLength(2);
    });
  });
}
