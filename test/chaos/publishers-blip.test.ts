/**
 * Two nodes publish to one topic at once while the broker blips (SIGKILL, restarted at once),
 * and a third node's broker link is down from before the blip until well after it: its
 * subscribers get what was published meanwhile from history when the link is back (or are told
 * what history no longer holds). Every accepted publish has its own seq in its numbering (no two
 * alike), and every subscriber on the three nodes gets each message once in order, or is told
 * of it: across the blip (Redis comes back empty, a new numbering; NATS keeps its store) and
 * across the cut. Publishes refused during the blip are owed to nobody; one whose answer was
 * lost may have been stored, and is then received like any other.
 *
 * A real redis-server or nats-server of the test's own (test/chaos/private-broker.ts), three
 * in-process gateways (C through a relay the test cuts), project clients subscribed with
 * subscribeWithMeta, and a raw-protocol subscriber with a position on C (what the server itself
 * says is checked, not what the client repairs). Bounded: each publisher publishes a fixed count.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import { Subscriber } from '../support/cluster.js';
import { waitFor } from '../support/waiting.js';
import { PublishLog, accountSubscription } from './accounting.js';
import { receivedEvents, violations, subscriberAccount } from './fault-accounts.js';
import { FaultRig, missingBroker } from './fault-rig.js';

/** History kept per topic: more than is published while C is cut, so C catches up whole. */
const HISTORY = 5_000;
/** Publishes per publisher before the cut, and after the blip (twice). */
const BEFORE = 60;
const AFTER = 60;
/** At most this many per publisher while the broker blips (a few ms apart). */
const MAX_BLIP_PUBLISHES = 2_000;

const rig = new FaultRig();
const res = rig.res;

afterEach(() => rig.cleanup());

describe.each(['redis', 'nats'] as const)('two nodes publishing through a %s blip', (kind) => {
  it.skipIf(missingBroker(kind))(
    'every accepted publish numbered once; every subscriber on three nodes (one cut off throughout) gets each once in order, or is told',
    async () => {
      const { server } = await rig.privateBroker(kind);
      const relay = await rig.relayTo(server.port);
      const prefix = `blip${randomBytes(4).toString('hex')}`;
      const broker = (port = server.port): Promise<Broker> => rig.connect(server, prefix, port);
      const brokers = [await broker(), await broker(), await broker(relay.port)];
      const nodes = await Promise.all(brokers.map((b) => res.gateway({ broker: b })));
      const [a, b, cNode] = nodes as [(typeof nodes)[0], (typeof nodes)[0], (typeof nodes)[0]];
      const topic = 'feed';
      for (const { gateway } of nodes) gateway.topic(topic, { history: { maxLength: HISTORY } });
      const subscribers = nodes.flatMap(({ url }, k) =>
        [1, 2].map((n) => new Subscriber(`S${n}@${'ABC'[k]}`, res.client(url), topic)),
      );
      await waitFor(() => subscribers.every((s) => s.knowsItsStart()), 'every subscriber placed');
      const raw = await res.rawRpc(cNode.url);
      const rawId = (await raw.request('subscribe', [topic, null, { position: true }]))
        .result as string;
      await raw.until(() => raw.notifications(rawId).length > 0, 'the raw position');
      const rawPosition = raw.notifications(rawId)[0]!.seq!;

      const log = new PublishLog([topic]);
      let gen = 0;
      let phase = 'before';
      const publishOne = async (gateway: Gateway): Promise<void> => {
        const record = log.start(topic, gen, phase);
        try {
          log.accept(record, await gateway.publish(topic, { t: topic, i: record.i }));
        } catch (err) {
          log.reject(record, err instanceof Error ? err.message : String(err));
        }
      };
      const both = (count: number): Promise<unknown> =>
        Promise.all(
          [a, b].map(async ({ gateway }) => {
            for (let k = 0; k < count; k++) await publishOne(gateway);
          }),
        );
      /** Both publish, a few ms apart, until `stop` (at most MAX_BLIP_PUBLISHES each). */
      const keepPublishing = (): { stop: () => Promise<unknown> } => {
        let on = true;
        const loops = Promise.all(
          [a, b].map(async ({ gateway }) => {
            for (let k = 0; on && k < MAX_BLIP_PUBLISHES; k++) {
              await publishOne(gateway);
              await new Promise((resolve) => setTimeout(resolve, 2));
            }
          }),
        );
        return {
          stop: () => {
            on = false;
            return loops;
          },
        };
      };

      await both(BEFORE);
      // C is cut off; the others keep publishing, through the blip.
      await relay.cut();
      phase = 'cut';
      await waitFor(() => !brokers[2]!.ready, 'C to notice the cut');
      const during = keepPublishing();
      await waitFor(() => log.acceptedOf(topic).length > 2 * BEFORE, 'publishes during the cut');
      await server.kill();
      // Publishes started from now on can only reach the restarted broker (Redis: renumbered).
      if (!server.keepsNumbering) gen++;
      phase = 'blip';
      await waitFor(() => !brokers[0]!.ready && !brokers[1]!.ready, 'A and B to lose the broker');
      await server.start();
      await waitFor(() => brokers[0]!.ready && brokers[1]!.ready, 'A and B linked again');
      phase = 'after';
      await during.stop();
      await both(AFTER);
      await relay.restore();
      await waitFor(() => brokers[2]!.ready, 'C linked again');
      await both(AFTER);
      const last = log.lastSeq(topic, gen);
      const hasLast = (events: readonly { seq?: number; data: unknown }[]): boolean =>
        events.some((e) => e.seq === last && log.recordOf(topic, e.data)?.gen === gen);
      await waitFor(() => subscribers.every((s) => hasLast(s.events)), 'the last message');
      await raw.until(() => hasLast(receivedEvents(raw.notifications(rawId))), 'the last (raw)');

      expect(log.conflicts).toEqual([]);
      const accounts = [
        ...subscribers.map((s) => subscriberAccount(s, topic, log)),
        accountSubscription('raw@C', topic, receivedEvents(raw.notifications(rawId)), log, {
          after: { gen: 0, seq: rawPosition },
        }),
      ];
      expect(accounts.flatMap(violations)).toEqual([]);
      // Publishes were refused during the blip, and accepted on both sides of it.
      const all = log.all(topic);
      expect(all.some((r) => r.error !== undefined)).toBe(true);
      expect(all.some((r) => r.phase === 'after' && r.seq !== undefined)).toBe(true);
    },
    30_000,
  );
});
