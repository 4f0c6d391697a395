/**
 * The broker dies (SIGKILL) and comes back while a resubscribe's replay is in progress: a client
 * resumes with `since` on a topic whose history it is behind on, its first page of history is
 * written, and the read of the next page is held until the test lets it go, either while the
 * broker is down (the read fails) or once it is back (the read is answered by the restarted
 * broker: on Redis, without persistence, a new numbering; on NATS, file storage, the same one).
 * Live messages published before the kill wait behind the replay; more are published after the
 * restart. The resuming subscriber (raw protocol, so what the server says is checked) and live
 * subscribers on both nodes must each get every message once in order, or be told of it.
 *
 * Real redis-server or nats-server on a port of their own (test/chaos/private-broker.ts), two
 * in-process gateways: P publishes, G serves the subscribers; G's history reads of the second
 * page are held by wrapping its broker's `history`.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
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

/** Reads of history after `afterSeq` wait until `release()`. */
function holdReadsAfter(broker: Broker, afterSeq: number) {
  const held: (() => void)[] = [];
  const history = broker.history.bind(broker);
  broker.history = (topic, after, limit) => {
    const read = () => history(topic, after, limit);
    if (after !== afterSeq) return read();
    return new Promise<void>((resolve) => held.push(resolve)).then(read);
  };
  return {
    held,
    release(): void {
      for (const go of held.splice(0)) go();
    },
  };
}

type Release = 'while the broker is down' | 'once the broker is back';

describe.each(['redis', 'nats'] as const)('a replay in progress when %s restarts', (kind) => {
  it
    .skipIf(missingBroker(kind))
    .each<Release>(['while the broker is down', 'once the broker is back'])(
    'the held page read let go %s: every subscriber gets each message once in order, or is told',
    async (release) => {
      const { server } = await rig.privateBroker(kind);
      const prefix = `replay${randomBytes(4).toString('hex')}`;
      const broker = (port = server.port): Promise<Broker> => rig.connect(server, prefix, port);
      const brokerP = await broker();
      const brokerG = await broker();
      // The replay's first page is 51..150 (FIRST_PAGE): the read after 150 is the second.
      const reads = holdReadsAfter(brokerG, 150);
      const p = await res.gateway({ broker: brokerP });
      const g = await res.gateway({ broker: brokerG });
      const topic = 'feed';
      for (const { gateway } of [p, g]) gateway.topic(topic, { history: { maxLength: 1_000 } });
      const live = [
        new Subscriber('live@G', res.client(g.url), topic),
        new Subscriber('live@P', res.client(p.url), topic),
      ];
      await waitFor(() => live.every((s) => s.knowsItsStart()), 'the live subscribers placed');

      const log = new PublishLog([topic]);
      const numbered = new NumberedPublishes(log, topic, 'replay', p.gateway);
      const publish = (count: number): Promise<number> => numbered.publish(count);
      const has = (events: readonly { seq?: number; data: unknown }[], seq: number): boolean =>
        numbered.has(events, seq);

      await publish(300);
      const { epoch } = await brokerP.history(topic, 0, 1);
      const resumer = await res.rawRpc(g.url);
      const reply = await resumer.request('subscribe', [topic, null, { since: 50, epoch }]);
      const id = reply.result as string;
      const got = () => receivedEvents(resumer.notifications(id));
      await waitFor(() => reads.held.length === 1, 'the read of the second page');
      await resumer.until(() => has(got(), 150), 'the first page written');
      // Live messages now wait behind the replay.
      const beforeKill = await publish(10);
      await waitFor(() => has(live[0]!.events, beforeKill), 'the live messages at G');

      await server.kill();
      await waitFor(() => !brokerG.ready && !brokerP.ready, 'both nodes to lose the broker');
      if (release === 'while the broker is down') {
        reads.release();
        await resumer.until(() => has(got(), beforeKill), 'the held live messages at the resumer');
      }
      await server.start();
      await waitFor(() => brokerG.ready && brokerP.ready, 'both nodes linked again');
      await publish(20);
      if (release === 'once the broker is back') reads.release();
      const last = await publish(5);
      await resumer.until(() => has(got(), last), 'the last message at the resumer');
      await waitFor(() => live.every((s) => has(s.events, last)), 'the last message live');

      const accounts = [
        ...live.map((s) => subscriberAccount(s, topic, log)),
        accountSubscription('resumer@G', topic, got(), log, { after: { gen: 0, seq: 50 } }),
      ];
      expect(accounts.flatMap(violations)).toEqual([]);
      if (kind === 'nats' && release === 'once the broker is back') {
        // The numbering survived and the read was answered: nothing to tell, all delivered.
        const outcomes = new Set(accounts.flatMap((a) => [...a.outcomes.values()]));
        expect(outcomes).toEqual(new Set(['delivered']));
      }
    },
    30_000,
  );
});
