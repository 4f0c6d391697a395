/**
 * A topic's JetStream stream lost and made again, so its numbering starts from 1 under a new
 * epoch (its creation time):
 *   - deleted (an operator, another deployment's sweep) while B's link is cut off, made again by
 *     P's next publish, and published past what B had before B is back;
 *   - deleted while B is linked;
 *   - kept in memory (`historyStorage: 'memory'`) and NATS restarted (SIGKILL): every stream is
 *     gone, the next publish makes it anew.
 * B's live subscribers (project clients, and a raw one with a position) and a client that left
 * after seq 25 and resumes with its since and epoch must each be told (a gap of unknown size with
 * the new epoch) and get the new numbering from its first message.
 *
 * A real nats-server with JetStream of the test's own (test/chaos/private-broker.ts), in-process
 * gateways: P publishes, B (through a relay) serves the subscribers. Accounted with the chaos
 * accounting; a publish whose seq does not exceed the one before it starts a new numbering.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { Subscriber } from '../support/cluster.js';
import { waitFor } from '../support/waiting.js';
import { PublishLog, accountSubscription } from './accounting.js';
import {
  NumberedPublishes,
  receivedEvents,
  violations,
  subscriberAccount,
} from './fault-accounts.js';
import { FaultRig, missingBroker } from './fault-rig.js';

const rig = new FaultRig();
const res = rig.res;

afterEach(() => rig.cleanup());

type Scenario =
  'deleted while B is cut off' | 'deleted while B is linked' | 'in memory, NATS restarted';

describe.skipIf(missingBroker('nats'))('a NATS stream lost and made again', () => {
  it.each<Scenario>([
    'deleted while B is cut off',
    'deleted while B is linked',
    'in memory, NATS restarted',
  ])(
    '%s: live subscribers and a resuming client are told, then get the new numbering',
    async (scenario) => {
      const { server } = await rig.privateBroker('nats');
      const relay = await rig.relayTo(server.port);
      const prefix = `recreated${randomBytes(4).toString('hex')}`;
      const broker = async (port: number): Promise<NatsBroker> =>
        // A NATS server gives a NatsBroker (its stream names are read below).
        (await rig.connect(server, prefix, port, {
          ...(scenario === 'in memory, NATS restarted' ? { historyStorage: 'memory' } : {}),
        })) as NatsBroker;
      const brokerP = await broker(server.port);
      const brokerB = await broker(relay.port);
      const p = await res.gateway({ broker: brokerP });
      const b = await res.gateway({ broker: brokerB });
      const topic = 'feed';
      for (const { gateway } of [p, b]) gateway.topic(topic);
      const subscribers = [1, 2].map((n) => new Subscriber(`S${n}@B`, res.client(b.url), topic));
      const away = new Subscriber('away@B', res.client(b.url), topic);
      await waitFor(
        () => [...subscribers, away].every((s) => s.knowsItsStart()),
        'every subscriber placed',
      );
      const raw = await res.rawRpc(b.url);
      const rawId = (await raw.request('subscribe', [topic, null, { position: true }]))
        .result as string;
      await raw.until(() => raw.notifications(rawId).length > 0, 'the raw position');

      const log = new PublishLog([topic]);
      const numbered = new NumberedPublishes(log, topic, scenario, p.gateway);
      const publish = (count: number): Promise<number> => numbered.publish(count);
      const has = (events: readonly { seq?: number; data: unknown }[], seq: number): boolean =>
        numbered.has(events, seq);

      await publish(25);
      await waitFor(() => has(away.events, 25), 'seq 25 at the client that leaves');
      const { epoch } = await brokerP.history(topic, 0, 1);
      await away.client.close();
      await publish(5);
      await waitFor(() => subscribers.every((s) => has(s.events, 30)), 'seq 30 at B');

      const cut = scenario === 'deleted while B is cut off';
      if (cut) {
        await relay.cut();
        await waitFor(() => !brokerB.ready, 'B to notice the cut');
      }
      if (scenario === 'in memory, NATS restarted') {
        await server.kill();
        await server.start();
        await waitFor(() => brokerP.ready && brokerB.ready, 'both nodes linked again');
      } else {
        const admin = await connectNats({ servers: server.url() });
        try {
          await (await jetstreamManager(admin)).streams.delete(brokerP.names(topic).stream);
        } finally {
          await admin.close();
        }
      }
      // The new numbering goes past what B had.
      while (numbered.gen === 0 || numbered.lastSeq <= 30) await publish(1);
      if (cut) {
        await relay.restore();
        await waitFor(() => brokerB.ready, 'B linked again');
      }
      const resumed = await res.rawRpc(b.url);
      const resumedId = (await resumed.request('subscribe', [topic, null, { since: 25, epoch }]))
        .result as string;
      const last = await publish(3);
      await waitFor(() => subscribers.every((s) => has(s.events, last)), 'the last message at B');
      for (const socket of [raw, resumed]) {
        const id = socket === raw ? rawId : resumedId;
        await socket.until(
          () => has(receivedEvents(socket.notifications(id)), last),
          'the last message (raw)',
        );
      }

      const position = raw.notifications(rawId)[0]!.seq!;
      const accounts = [
        ...subscribers.map((s) => subscriberAccount(s, topic, log)),
        accountSubscription('raw@B', topic, receivedEvents(raw.notifications(rawId)), log, {
          after: { gen: 0, seq: position },
        }),
        accountSubscription(
          'resumed@B',
          topic,
          receivedEvents(resumed.notifications(resumedId)),
          log,
          { after: { gen: 0, seq: 25 } },
        ),
      ];
      expect(accounts.flatMap(violations)).toEqual([]);
      // The new numbering reached everyone from its first message.
      for (const account of accounts) {
        const latest = [...account.outcomes].filter(([record]) => record.gen === numbered.gen);
        expect({ who: account.label, outcomes: new Set(latest.map(([, o]) => o)) }).toEqual({
          who: account.label,
          outcomes: new Set(['delivered']),
        });
      }
    },
    30_000,
  );
});
