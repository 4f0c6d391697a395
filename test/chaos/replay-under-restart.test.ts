/**
 * The broker goes away and comes back while a resubscribe's replay is in progress: a client
 * resumes with `since` on a topic whose history it is behind on, its first page of history is
 * written, and the read of the next page is held until the test lets it go. The faults:
 *   - the broker dies (SIGKILL) and restarts, the read let go while it is down (the read fails)
 *     or once it is back (answered by the restarted broker: on Redis, without persistence, a new
 *     numbering; on NATS, file storage, the same one);
 *   - G's link to the broker is cut (a TCP relay) while the broker keeps everything, the read
 *     let go while it is cut (it fails).
 * Live messages published before the fault wait behind the replay; more are published during
 * and after it. The resuming subscriber (raw protocol, so what the server says is checked) and
 * live subscribers on both nodes must each get every message once in order, or be told of it;
 * and nothing the broker still holds may be told as missing: every message of a numbering that
 * survived (all of them but on a restarted Redis, which loses the old one) is delivered. A read
 * that failed while the link was down is made again once it is back, and live messages of a
 * new numbering held behind the replay follow it.
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

/**
 * The first read of history after `afterSeq` waits until `release()` (later ones, made again
 * after it failed, go at once); `failed` counts those reads that failed.
 */
function holdReadsAfter(broker: Broker, afterSeq: number) {
  const held: (() => void)[] = [];
  const history = broker.history.bind(broker);
  let holding = true;
  const reads = {
    held,
    failed: 0,
    release(): void {
      holding = false;
      for (const go of held.splice(0)) go();
    },
  };
  broker.history = (topic, after, limit) => {
    const read = () =>
      history(topic, after, limit).catch((err: unknown) => {
        reads.failed++;
        throw err;
      });
    if (after !== afterSeq || !holding) return read();
    return new Promise<void>((resolve) => held.push(resolve)).then(read);
  };
  return reads;
}

type Fault =
  | 'broker restarted, the read let go while it is down'
  | 'broker restarted, the read let go once it is back'
  | "G's link cut, the read let go while it is cut";

const FAULTS: Fault[] = [
  'broker restarted, the read let go while it is down',
  'broker restarted, the read let go once it is back',
  "G's link cut, the read let go while it is cut",
];

describe.each(['redis', 'nats'] as const)('a replay in progress when %s goes away', (kind) => {
  it.skipIf(missingBroker(kind)).each<Fault>(FAULTS)(
    '%s: every subscriber gets each message once in order, or is told; nothing held is told missing',
    async (fault) => {
      const { server } = await rig.privateBroker(kind);
      const prefix = `replay${randomBytes(4).toString('hex')}`;
      const broker = (port = server.port): Promise<Broker> => rig.connect(server, prefix, port);
      const cut = fault === "G's link cut, the read let go while it is cut";
      const relay = cut ? await rig.relayTo(server.port) : undefined;
      const brokerP = await broker();
      const brokerG = await broker(relay?.port);
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
      const beforeFault = await publish(10);
      await waitFor(() => has(live[0]!.events, beforeFault), 'the live messages at G');

      if (relay) {
        await relay.cut();
        await waitFor(() => !brokerG.ready, 'G to lose its link');
        reads.release();
        await waitFor(() => reads.failed > 0, 'the read to fail');
        // The broker keeps taking publishes meanwhile; G gets them once its link is back.
        await publish(20);
        await relay.restore();
        await waitFor(() => brokerG.ready, 'G linked again');
      } else {
        await server.kill();
        await waitFor(() => !brokerG.ready && !brokerP.ready, 'both nodes to lose the broker');
        if (fault === 'broker restarted, the read let go while it is down') {
          reads.release();
          await waitFor(() => reads.failed > 0, 'the read to fail');
        }
        await server.start();
        await waitFor(() => brokerG.ready && brokerP.ready, 'both nodes linked again');
        await publish(20);
        if (fault === 'broker restarted, the read let go once it is back') reads.release();
      }
      const last = await publish(5);
      await resumer.until(() => has(got(), last), 'the last message at the resumer');
      await waitFor(() => live.every((s) => has(s.events, last)), 'the last message live');

      const accounts = [
        ...live.map((s) => subscriberAccount(s, topic, log)),
        accountSubscription('resumer@G', topic, got(), log, { after: { gen: 0, seq: 50 } }),
      ];
      expect(accounts.flatMap(violations)).toEqual([]);
      // What the broker held when the replay read on is delivered, not told as a gap: every
      // message of a numbering that survived (a restarted Redis loses its first one).
      const lostNumbering = !cut && !server.keepsNumbering ? 0 : -1;
      const notDelivered = accounts.flatMap((a) =>
        [...a.outcomes]
          .filter(([record, outcome]) => outcome !== 'delivered' && record.gen !== lostNumbering)
          .map(([record, outcome]) => `${a.label}: ${record.gen}:${record.seq} ${outcome}`),
      );
      expect(notDelivered).toEqual([]);
    },
    30_000,
  );
});
