/**
 * A gateway node SIGKILLed while it fans a busy topic out to more subscribers than it writes in
 * one turn (FAN_OUT_PER_TURN): messages keep being published through another node, so at the
 * kill the subscribers stand at different seqs (some have had a message others have not). Each
 * fails over to the surviving node and resumes from its own last seq: every one must get every
 * message once, in order (history holds them all, so no gap either). A is killed the moment the
 * first subscriber has message KILL_AT, while the others are being written it; where each stood
 * is printed (a run here: 288 at seq 20 and 12 at 21 on Redis, 209 at 19 and 91 at 20 on NATS).
 *
 * Two gateway processes (test/cluster/node.ts) on the shared Redis or NATS under a prefix of
 * their own, FAN_OUT_PER_TURN + 50 project clients each subscribed to one topic on A (their URL
 * list A then B), a publisher on B at a steady pace. Bounded in count: a fixed number of
 * publishes before and after the kill.
 */
import { dirname } from 'node:path';
import { rmSync } from 'node:fs';
import { WebSocket } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FAN_OUT_PER_TURN } from '../../src/pubsub/topic-registry.js';
import { Cluster, Subscriber, buildNodeScript } from '../support/cluster.js';
import { brokersUp } from '../support/brokers.js';
import { sleep } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';
import { PublishLog } from './accounting.js';
import { violations, subscriberAccount } from './fault-accounts.js';

const mustRun = process.env['CI'] === 'true';
const up = await brokersUp();
const SUBSCRIBERS = FAN_OUT_PER_TURN + 50;
/** Publishes before the kill and after it, one every PACE_MS. */
const BEFORE = 40;
const AFTER = 40;
const PACE_MS = 5;
/** The seq whose arrival at one subscriber kills A. */
const KILL_AT = BEFORE / 2;

/** Subscribers connecting from one loopback address. */
const PER_ADDRESS = 10;

/** `ws` connecting from `host` (a loopback address other than 127.0.0.1). */
function fromAddress(host: string): typeof WebSocket {
  return class extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols, { localAddress: host });
    }
  } as typeof WebSocket;
}

let script = '';
let cluster: Cluster | undefined;
beforeAll(async () => {
  script = (await buildNodeScript()).script;
}, 120_000);
afterEach(async () => {
  await cluster?.cleanup();
  cluster = undefined;
});
afterAll(() => {
  if (script) rmSync(dirname(script), { recursive: true, force: true });
});

describe.each(['redis', 'nats'] as const)('a node killed mid-fan-out (%s)', (kind) => {
  it.skipIf(!up[kind] && !mustRun)(
    `${SUBSCRIBERS} subscribers at different seqs when their node dies each resume on the other node: every message once, in order`,
    async () => {
      const c = (cluster = new Cluster(script, kind));
      const [a, b] = await Promise.all([c.node('A'), c.node('B')]);
      // From 127.0.0.2 up, PER_ADDRESS each: within a node's limits per client address.
      const subscribers = Array.from(
        { length: SUBSCRIBERS },
        (_, k) =>
          new Subscriber(
            `S${k}`,
            c.client([a.url, b.url], {
              callTimeoutMs: 20_000,
              WebSocket: fromAddress(`127.0.0.${2 + Math.floor(k / PER_ADDRESS)}`),
            }),
          ),
      );
      await c.subscribersOn([a], SUBSCRIBERS);
      await waitFor(() => subscribers.every((s) => s.knowsItsStart()), 'every subscriber placed');
      const publisher = c.client(b.url);
      const log = new PublishLog(['feed']);
      const publish = async (count: number): Promise<void> => {
        for (let k = 0; k < count; k++) {
          const record = log.start('feed', 0, 'fan-out');
          log.accept(
            record,
            (await publisher.call('feed.publish', { t: 'feed', i: record.i })) as number,
          );
          await sleep(PACE_MS);
        }
      };

      // Each subscriber's last seq from A: where it stands when its connection to A is lost.
      const lastFromA = new Map<Subscriber, number>();
      for (const sub of subscribers) {
        sub.client.state$.subscribe((state) => {
          if (state !== 'open' && sub.states.includes('open') && !lastFromA.has(sub)) {
            lastFromA.set(sub, sub.messages.at(-1)?.seq ?? 0);
          }
        });
      }
      // A is SIGKILLed the moment one subscriber has message KILL_AT: the others are getting it.
      const trigger = subscribers[0]!.client.subscribeWithMeta('feed').subscribe((event) => {
        if (event.seq === KILL_AT) a.child.kill('SIGKILL');
      });
      const before = publish(BEFORE);
      await waitFor(() => lastFromA.size === SUBSCRIBERS, 'every subscriber to lose A');
      trigger.unsubscribe();
      await before;
      await publish(AFTER);
      const last = log.lastSeq('feed', 0);
      await waitFor(
        () => subscribers.every((s) => s.messages.at(-1)?.seq === last),
        () =>
          `the last message everywhere (${subscribers.filter((s) => s.messages.at(-1)?.seq === last).length} of ${SUBSCRIBERS})`,
        30_000,
      );

      const accounts = subscribers.map((s) => subscriberAccount(s, 'feed', log));
      expect(accounts.flatMap(violations)).toEqual([]);
      expect(new Set(accounts.flatMap((a) => [...a.outcomes.values()]))).toEqual(
        new Set(['delivered']),
      );
      expect(subscribers.flatMap((s) => s.errors)).toEqual([]);
      // Where the kill left them, for the record: how many stood at each seq.
      const at = new Map<number, number>();
      for (const seq of lastFromA.values()) at.set(seq, (at.get(seq) ?? 0) + 1);
      const counts = [...at].sort(([x], [y]) => x - y).map(([seq, n]) => `${seq}: ${n}`);
      console.log(`${kind}: subscribers by last seq from A: ${counts.join(', ')}`);
    },
    60_000,
  );
});
