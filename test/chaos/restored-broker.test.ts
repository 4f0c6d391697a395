/**
 * A broker restored from an older state: Redis restarted from its last snapshot (an RDB save,
 * an append-only file missing its last writes), NATS from an older copy of its store (a crash
 * before its last writes reached the disk, a restored backup). Publishes it acknowledged after
 * that state are gone, and the topic's count is back where the state left it, under the same
 * epoch, so the next publishes get those seqs again. A subscriber that had the lost messages
 * must not take the new ones for copies, nor one that resumes from among them skip the new ones:
 * each must be told (a gap of unknown size, with the new epoch) and then get the new numbering.
 *
 * A real redis-server or nats-server of the test's own (test/chaos/private-broker.ts; the state
 * taken at seq 20 by SAVE, or by a copy of the NATS store made while the server is stopped), and
 * in-process gateways:
 *   - P, the publishing node, which has published seqs 1..30;
 *   - B, with live subscribers, its broker link through a relay;
 *   - a client that left after seq 25 (one of those lost) and resumes at B with its since and
 *     epoch once the topic's count has passed 30 again.
 * How it goes after the restore:
 *   - `P holding` (Redis): P, which also has a subscriber of the topic, publishes first; B is
 *     cut off until the count has passed 30, so B cannot tell from its own catch-up;
 *   - `P publishing only` (Redis): the same, P without a subscriber of the topic;
 *   - `a new node publishing, B back first`: B's link is back first, and a node that has never
 *     seen the topic (N) publishes, past 30: only B can tell. On NATS, where the epoch stays,
 *     B's subscribers are told; a client resuming from a lost seq is not checked (it cannot be
 *     told: docs/delivery-guarantees.md).
 * Accounted with the chaos accounting; a publish whose seq does not exceed the one before it
 * starts a new numbering (a new `gen`).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { Subscriber } from '../support/cluster.js';
import { withRedis } from '../support/brokers.js';
import type { BrokerKind } from '../support/brokers.js';
import { settle, waitFor } from '../support/waiting.js';
import { PublishLog, accountSubscription } from './accounting.js';
import type { SubscriptionAccount } from './accounting.js';
import {
  NumberedPublishes,
  receivedEvents,
  violations,
  subscriberAccount,
} from './fault-accounts.js';
import { FaultRig, missingBroker } from './fault-rig.js';
import type { PrivateBroker } from './private-broker.js';

const rig = new FaultRig();
const res = rig.res;

afterEach(() => rig.cleanup());

type Scenario = 'P holding' | 'P publishing only' | 'a new node publishing, B back first';

/** A private broker whose state can be taken, and later put back after a SIGKILL. */
class RestorableBroker {
  private copy = '';

  constructor(readonly server: PrivateBroker) {}

  /** Keep the broker's state as it is now (NATS: stopped, its store copied, started again). */
  async take(): Promise<void> {
    if (this.server.kind === 'redis') {
      await withRedis(this.server.url(), (admin) => admin.save());
      return;
    }
    await this.server.kill();
    this.copy = mkdtempSync(join(tmpdir(), 'wsrpc-nats-copy-'));
    const copy = this.copy;
    rig.onCleanup(() => Promise.resolve(rmSync(copy, { recursive: true, force: true })));
    cpSync(this.server.storeDir, this.copy, { recursive: true });
    await this.server.start();
  }

  /** SIGKILL the broker and start it again from the state taken. */
  async restore(): Promise<void> {
    await this.server.kill();
    if (this.server.kind === 'nats') {
      rmSync(this.server.storeDir, { recursive: true, force: true });
      cpSync(this.copy, this.server.storeDir, { recursive: true });
    }
    await this.server.start();
  }
}

const SCENARIOS: Record<BrokerKind, Scenario[]> = {
  redis: ['P holding', 'P publishing only', 'a new node publishing, B back first'],
  // A NATS node finds the count went back when it resumes a subscription (only then), and
  // tells its own subscribers; the epoch stays, so a client resuming with a `since` the count
  // has passed cannot be told (docs/delivery-guarantees.md, where the guarantee stops).
  nats: ['a new node publishing, B back first'],
};

describe.each(['redis', 'nats'] as const)('%s restored from an older state', (kind) => {
  it.skipIf(missingBroker(kind)).each<Scenario>(SCENARIOS[kind])(
    '%s: every subscriber is told of the new numbering, and gets it whole',
    async (scenario) => {
      const { server } = await rig.privateBroker(kind);
      const state = new RestorableBroker(server);
      const relay = await rig.relayTo(server.port);
      const prefix = `restored${randomBytes(4).toString('hex')}`;
      const broker = (port = server.port): Promise<Broker> => rig.connect(server, prefix, port);
      const brokerP = await broker();
      const brokerB = await broker(relay.port);
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
      const numbered = new NumberedPublishes(log, topic, 'snapshot', p.gateway);
      const publish = async (count: number): Promise<void> => {
        await numbered.publish(count);
      };
      const has = (sub: Subscriber, seq: number, g = numbered.gen): boolean =>
        numbered.has(sub.events, seq, g);
      const passed30 = async (): Promise<void> => {
        while (numbered.gen === 0 || numbered.lastSeq <= 30) await publish(1);
      };

      await publish(20);
      await state.take(); // at seq 20
      await waitFor(() => brokerP.ready && brokerB.ready, 'both nodes linked');
      await publish(5);
      await waitFor(() => has(away, 25), 'seq 25 at the client that leaves');
      const { epoch } = await brokerP.history(topic, 0);
      await away.client.close();
      await publish(5); // seqs 26..30: acknowledged, then lost with the restore
      await waitFor(() => subscribers.every((s) => has(s, 30)), 'seq 30 everywhere');

      await relay.cut();
      await waitFor(() => !brokerB.ready, 'B to notice the cut');
      await state.restore();
      if (scenario === 'a new node publishing, B back first') {
        await relay.restore();
        await waitFor(() => brokerB.ready, 'B linked again');
        const n = await res.gateway({ broker: await broker() });
        n.gateway.topic(topic);
        numbered.via = n.gateway;
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
        () => subscribers.every((s) => has(s, numbered.lastSeq)),
        'the last message everywhere',
      );

      if (kind === 'nats') {
        check(subscribers, []);
        return;
      }
      // The client that left after seq 25 resumes with its since and epoch.
      const resumed = await res.rawRpc(b.url);
      const reply = await resumed.request('subscribe', [topic, null, { since: 25, epoch }]);
      const id = reply.result as string;
      await publish(1);
      const final = numbered.lastSeq;
      await resumed.until(
        () => resumed.notifications(id).some((n) => n.seq === final),
        'the resumed client to have the last message',
      );
      await waitFor(() => subscribers.every((s) => has(s, final)), 'the last message everywhere');

      check(subscribers, [
        accountSubscription('resumed@B', topic, receivedEvents(resumed.notifications(id)), log, {
          after: { gen: 0, seq: 25 },
        }),
      ]);

      /**
       * Every subscription's account: no violation; of the last numbering, the messages the
       * gap signal did not cover (those published before the node noticed, at most) delivered.
       */
      function check(live: readonly Subscriber[], more: readonly SubscriptionAccount[]): void {
        const accounts = [...live.map((s) => subscriberAccount(s, topic, log)), ...more];
        expect(accounts.flatMap(violations)).toEqual([]);
        for (const account of accounts) {
          const latest = [...account.outcomes].filter(([record]) => record.gen === numbered.gen);
          const firstDelivered = latest.findIndex(([, outcome]) => outcome === 'delivered');
          const told = latest.slice(0, Math.max(0, firstDelivered)).map(([, outcome]) => outcome);
          expect({ who: account.label, told: new Set(told) }).toEqual({
            who: account.label,
            told: new Set(told.length > 0 ? ['unknown'] : []),
          });
          const rest = latest.slice(firstDelivered).map(([, outcome]) => outcome);
          expect({ who: account.label, rest: new Set(rest) }).toEqual({
            who: account.label,
            rest: new Set(['delivered']),
          });
        }
      }
    },
    30_000,
  );
});
