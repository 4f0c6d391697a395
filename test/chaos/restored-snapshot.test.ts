/**
 * Redis restored from an older snapshot (a restart from its last RDB save, an append-only file
 * missing its last second): publishes it acknowledged after the snapshot are gone, and the
 * topic's count is back where the snapshot left it, under the same epoch, so the next publishes
 * get those seqs again. A subscriber that had the lost messages must not take the new ones for
 * copies, nor one that resumes from among them skip the new ones: each must be told (a gap of
 * unknown size, with the new epoch) and then get the new numbering.
 *
 * Real redis-server on a port of its own (SAVE by the test, SIGKILL, restart on the same
 * directory), in-process gateways on RedisBroker:
 *   - P, the publishing node, which has published seqs 1..30;
 *   - B, with live subscribers, its broker link through a relay;
 *   - a client that left after seq 25 (one of those lost) and resumes at B with its since and
 *     epoch once the topic's count has passed 30 again.
 * Three ways it goes after the restore:
 *   - `P holding`: P, which also has a subscriber of the topic, publishes first; B is cut off
 *     until the count has passed 30, so B cannot tell from its own catch-up;
 *   - `P publishing only`: the same, P without a subscriber of the topic;
 *   - `a new node publishing, B back first`: B's link is back first, and a node that has never
 *     seen the topic (N) publishes, past 30: only B's catch-up can tell.
 * Accounted with the chaos accounting; a publish whose seq does not exceed the one before it
 * starts a new numbering (a new `gen`).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import { Cluster, Subscriber } from '../support/cluster.js';
import { withRedis } from '../support/brokers.js';
import { freePort } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { Resources } from '../support/resources.js';
import { hasProgram, startRedisServer } from '../support/server-processes.js';
import { TcpRelay } from '../support/tcp-relay.js';
import { inCi } from '../support/environment.js';
import { settle, waitFor } from '../support/waiting.js';
import { PublishLog, accountSubscription } from './accounting.js';
import { receivedEvents, violations } from './fault-accounts.js';

const missing = !hasProgram('redis-server') && !inCi;
const res = new Resources();
const closers: (() => Promise<unknown>)[] = [];
let cluster: Cluster | undefined;

afterEach(async () => {
  await res.cleanup();
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  await cluster?.cleanup();
  cluster = undefined;
});

type Scenario = 'P holding' | 'P publishing only' | 'a new node publishing, B back first';

describe.skipIf(missing)('Redis restored from an older snapshot', () => {
  it.each<Scenario>(['P holding', 'P publishing only', 'a new node publishing, B back first'])(
    '%s: every subscriber is told of the new numbering, and gets it whole',
    async (scenario) => {
      const c = (cluster = new Cluster('', 'redis'));
      const port = await freePort();
      const dir = c.tempDir();
      const redis = await startRedisServer(c, port, dir);
      const url = `redis://127.0.0.1:${port}`;
      const relay = new TcpRelay(port);
      await relay.start();
      closers.push(() => relay.cut());
      const prefix = `snap${randomBytes(4).toString('hex')}:`;
      const broker = async (to: string): Promise<RedisBroker> => {
        const made = await RedisBroker.create({ url: to, prefix, reconnectMaxDelayMs: 200 });
        closers.push(() => made.close());
        return made;
      };
      const brokerP = await broker(url);
      const brokerB = await broker(`redis://127.0.0.1:${relay.port}`);
      const p = await res.gateway({ broker: brokerP });
      const b = await res.gateway({ broker: brokerB });
      const topic = 'feed';
      for (const { gateway } of [p, b]) gateway.topic(topic);
      const subscribers = [new Subscriber('S1@B', res.client(b.url), topic)];
      subscribers.push(new Subscriber('S2@B', res.client(b.url), topic));
      if (scenario === 'P holding') {
        subscribers.push(new Subscriber('S@P', res.client(p.url), topic));
      }
      const away = new Subscriber('away@B', res.client(b.url), topic);
      await waitFor(
        () => [...subscribers, away].every((s) => s.knowsItsStart()),
        'every subscriber to have its position',
      );

      const log = new PublishLog([topic]);
      let gen = 0;
      let publisher = p.gateway;
      const publish = async (count: number): Promise<void> => {
        for (let k = 0; k < count; k++) {
          const record = log.start(topic, gen, 'snapshot');
          const seq = await publisher.publish(topic, { t: topic, i: record.i });
          // Not past the seq before it: the topic is numbered anew from here.
          if (seq <= log.lastSeq(topic, gen)) record.gen = ++gen;
          log.accept(record, seq);
        }
      };
      const has = (sub: Subscriber, seq: number, g = gen): boolean =>
        sub.events.some(
          (e) => e.seq === seq && log.recordOf(topic, e.data)?.gen === g && e.gap === undefined,
        );
      const passed30 = async (): Promise<void> => {
        while (gen === 0 || log.lastSeq(topic, gen) <= 30) await publish(1);
      };

      await publish(20);
      await withRedis(url, (admin) => admin.save()); // the snapshot: seq 20
      await publish(5);
      await waitFor(() => has(away, 25), 'seq 25 at the client that leaves');
      const { epoch } = await brokerP.history(topic, 0);
      await away.client.close();
      await publish(5); // seqs 26..30: acknowledged, then lost with Redis
      await waitFor(() => subscribers.every((s) => has(s, 30)), 'seq 30 everywhere');

      await relay.cut();
      await waitFor(() => !brokerB.ready, 'B to notice the cut');
      await killChild(redis);
      await startRedisServer(c, port, dir); // from its snapshot
      expect(await withRedis(url, (admin) => admin.dbsize())).toBeGreaterThan(0);
      if (scenario === 'a new node publishing, B back first') {
        await relay.restore();
        await waitFor(() => brokerB.ready, 'B linked again');
        const n = await res.gateway({ broker: await broker(url) });
        n.gateway.topic(topic);
        publisher = n.gateway;
        // One at a time until B's subscribers have news of the restored topic: B has caught up.
        const before = subscribers.map((s) => s.events.length);
        await waitFor(async () => {
          await publish(1);
          await settle(() => subscribers.every((s, k) => s.events.length > before[k]!), 500);
          return subscribers.every((s, k) => s.events.length > before[k]!);
        }, 'B to catch up');
        await passed30();
      } else {
        await waitFor(() => brokerP.ready, 'P linked again');
        await passed30();
        await relay.restore();
        await waitFor(() => brokerB.ready, 'B linked again');
      }
      await publish(1);
      await waitFor(
        () => subscribers.every((s) => has(s, log.lastSeq(topic, gen))),
        'the last message everywhere',
      );

      // The client that left after seq 25 resumes with its since and epoch.
      const resumed = await res.rawRpc(b.url);
      const reply = await resumed.request('subscribe', [topic, null, { since: 25, epoch }]);
      const id = reply.result as string;
      await publish(1);
      const final = log.lastSeq(topic, gen);
      await resumed.until(
        () => resumed.notifications(id).some((n) => n.seq === final),
        'the resumed client to have the last message',
      );
      await waitFor(() => subscribers.every((s) => has(s, final)), 'the last message everywhere');

      const accounts = subscribers.map((s) =>
        accountSubscription(
          s.label,
          topic,
          s.events.map((e) => ({ ...e, at: 0 })),
          log,
        ),
      );
      accounts.push(
        accountSubscription('resumed@B', topic, receivedEvents(resumed.notifications(id)), log, {
          after: { gen: 0, seq: 25 },
        }),
      );
      expect(accounts.flatMap(violations)).toEqual([]);
      // The last numbering reached everyone whole, from its first message.
      for (const account of accounts) {
        const latest = [...account.outcomes].filter(([record]) => record.gen === gen);
        expect({ who: account.label, outcomes: new Set(latest.map(([, o]) => o)) }).toEqual({
          who: account.label,
          outcomes: new Set(['delivered']),
        });
      }
    },
    30_000,
  );
});
