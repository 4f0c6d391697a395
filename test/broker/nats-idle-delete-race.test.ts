/**
 * Deleting an idle topic stream (NatsStreams.deleteIfIdle, the sweep) against publishes from
 * other nodes landing at any moment of it, on the shared NATS: JetStream deletes a stream by
 * name, with no condition on what it holds, so a publish stored between the idle check and
 * the delete would be acknowledged with a seq and then deleted with the stream. Each run puts
 * one publish (through its own connection, as another node's) before one of the requests the
 * deleter makes; every publish acknowledged must still be in the stream's history afterwards.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreationBudget } from '../../src/pubsub/creation-budget.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { readHistory } from '../../src/pubsub/nats-history.js';
import type { Link } from '../../src/pubsub/nats-link.js';
import { natsTopicNames } from '../../src/pubsub/nats-names.js';
import { NatsStreams } from '../../src/pubsub/nats-streams.js';
import { canConnect } from '../support/network.js';
import { waitUntil } from '../support/waiting.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const skip = !(await canConnect(4222)) && process.env.CI !== 'true';

const run = `wsrpcidle${randomBytes(4).toString('hex')}`;
let prefixes = 0;
const newPrefix = (): string => `${run}p${++prefixes}`;

/** The deleter's connection, and another one standing for other nodes. */
let deleterNc: NatsConnection;
let otherNc: NatsConnection;
let link: Link;
let other: { js: JetStreamClient; jsm: JetStreamManager };

/**
 * `link` with a hook run before the deleter's `n`-th request to NATS (stream info, update,
 * delete, publish), counting from 1; `requests()` says how many it made.
 */
function hookedLink(
  n: number,
  before: () => Promise<void>,
): { link: Link; requests: () => number } {
  let count = 0;
  const step = async (): Promise<void> => {
    if (++count === n) await before();
  };
  const streams = link.jsm.streams;
  const hookedStreams = new Proxy(streams, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function' || !['info', 'update', 'delete'].includes(String(key))) {
        return value;
      }
      return async (...args: unknown[]) => {
        await step();
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  const jsm = new Proxy(link.jsm, {
    get: (target, key, receiver): unknown =>
      key === 'streams' ? hookedStreams : (Reflect.get(target, key, receiver) as unknown),
  });
  const js = new Proxy(link.js, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (key !== 'publish' || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await step();
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  return { link: { nc: link.nc, js, jsm }, requests: () => count };
}

/**
 * An idle stream of `topic`: made by a publish, its one message expired, no consumer; then
 * given a long max age, so that a message published later stays while the test reads it.
 */
async function idleStream(prefix: string, topic: string): Promise<void> {
  const streams = new NatsStreams(prefix, 1, new CreationBudget({}), 5_000);
  await streams.ensureStream(link, topic, { maxLength: 10, maxAgeMs: 100 });
  const { stream, subject } = natsTopicNames(prefix, topic);
  await link.js.publish(subject, '"expiring"');
  await waitUntil(
    async () => (await link.jsm.streams.info(stream)).state.messages === 0,
    'the message to expire',
  );
  // Idle now: what is published from here on is kept long enough to be read back.
  await link.jsm.streams.update(stream, { max_age: 600_000_000_000 });
}

/** Publish through the other connection: the acknowledged seq, or undefined when refused. */
async function publishElsewhere(subject: string, payload: string): Promise<number | undefined> {
  try {
    return (await other.js.publish(subject, payload, { timeout: 5_000 })).seq;
  } catch {
    return undefined;
  }
}

describe.skipIf(skip)('NATS: deleting an idle stream loses no acknowledged publish', () => {
  beforeAll(async () => {
    deleterNc = await connect({ servers: NATS_URL });
    otherNc = await connect({ servers: NATS_URL });
    link = {
      nc: deleterNc,
      js: jetstream(deleterNc),
      jsm: await jetstreamManager(deleterNc, { checkAPI: false }),
    };
    other = { js: jetstream(otherNc), jsm: await jetstreamManager(otherNc, { checkAPI: false }) };
  });

  afterAll(async () => {
    const ours: string[] = [];
    for await (const name of other.jsm.streams.names()) if (name.startsWith(run)) ours.push(name);
    await Promise.all(ours.map((name) => other.jsm.streams.delete(name).catch(() => false)));
    await deleterNc.close();
    await otherNc.close();
  });

  it('a publish landing before any request of deleteIfIdle is kept, or refused', async () => {
    // Every request the deleter makes gets a publish before it, one run each, until a run
    // whose deleter made fewer requests than the hook's place.
    for (let n = 1; ; n++) {
      const prefix = newPrefix();
      const topic = 'room.idle';
      const { stream, subject } = natsTopicNames(prefix, topic);
      await idleStream(prefix, topic);
      let acked: number | undefined;
      const hooked = hookedLink(n, async () => {
        acked = await publishElsewhere(subject, `"landed before request ${n}"`);
      });
      const streams = new NatsStreams(prefix, 1, new CreationBudget({}), 5_000);
      const deleted = await streams.deleteIfIdle(hooked.link, topic);
      if (acked !== undefined) {
        // Acknowledged: still retained, with its seq; so the stream was not deleted.
        expect(deleted, `request ${n}`).toBe(false);
        const history = await readHistory(link, stream, topic, acked - 1, 1);
        expect(
          history.messages.map((m) => m.seq),
          `the publish before request ${n}`,
        ).toEqual([acked]);
        // And the stream takes publishes as before.
        expect(await publishElsewhere(subject, '"after"')).toBe(acked + 1);
      } else {
        expect(deleted, `request ${n}`).toBe(true);
      }
      if (hooked.requests() < n) break;
    }
  });

  it('the stream of a deleter that stopped half-way is settled by the next publish and by the sweep', async () => {
    const prefix = newPrefix();
    const publisher = await NatsBroker.connect({
      servers: NATS_URL,
      prefix,
      timeoutMs: 5_000,
      idleStreamSweepMs: 0,
    });
    try {
      // A deleter stops (its node killed) at each request: whatever it left behind, the
      // topic takes publishes again and each acknowledged one is retained.
      for (let n = 1; ; n++) {
        const topic = `room.stopped${n}`;
        const { stream } = natsTopicNames(prefix, topic);
        await idleStream(prefix, topic);
        let stopped = false;
        const hooked = hookedLink(n, () => {
          stopped = true;
          return Promise.reject(new Error('deleter stopped'));
        });
        const streams = new NatsStreams(prefix, 1, new CreationBudget({}), 5_000);
        await streams.deleteIfIdle(hooked.link, topic).catch(() => false);
        if (!stopped) break;
        const seq = await publisher.publish(topic, '"after the deleter stopped"');
        const history = await publisher.history(topic, seq - 1, 1);
        expect(
          history.messages.map((m) => m.seq),
          `stopped at request ${n}`,
        ).toEqual([seq]);
        expect((await other.jsm.streams.info(stream)).state.messages).toBe(1);
      }
      // Left half-way with nothing published since: the sweep deletes it.
      const topic = 'room.left';
      const { stream } = natsTopicNames(prefix, topic);
      await idleStream(prefix, topic);
      const hooked = hookedLink(3, () => Promise.reject(new Error('deleter stopped')));
      const streams = new NatsStreams(prefix, 1, new CreationBudget({}), 5_000);
      await streams.deleteIfIdle(hooked.link, topic).catch(() => false);
      expect(await publisher.sweepIdleStreams()).toBeGreaterThanOrEqual(1);
      await expect(other.jsm.streams.info(stream)).rejects.toThrow();
    } finally {
      await publisher.close();
    }
  });
});
