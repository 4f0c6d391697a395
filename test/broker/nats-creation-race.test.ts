/**
 * Nodes making the same JetStream stream at the same moment, on the shared NATS: a topic's
 * first publishes from several nodes at once (each node adds the topic's stream), and the
 * first idempotent publishes of a prefix (each node also adds the `<prefix>-once` bucket). One
 * add may be refused with "subjects overlap with an existing stream", or answered with the
 * stream another add is still setting up, which takes no message yet ("no responders"); every
 * publish must land all the same. Each race is lost rarely, so the test runs many of them.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { NATS_URL } from '../support/brokers.js';
import { canConnect } from '../support/network.js';

const skip = !(await canConnect(4222)) && process.env['CI'] !== 'true';

/** Every prefix this file uses starts with it; their streams are deleted in afterAll. */
const run = `wsrpcrace${randomBytes(4).toString('hex')}`;
let prefixes = 0;
const NODES = 4;
const ROUNDS = 30;
const TOPICS_PER_ROUND = 4;

const brokers: NatsBroker[] = [];

afterEach(async () => {
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  if (skip) return;
  const nc = await connect({ servers: NATS_URL, timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    const ours: string[] = [];
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(run) || name.startsWith(`KV_${run}`)) ours.push(name);
    }
    for (const name of ours) await jsm.streams.delete(name).catch(() => false);
  } finally {
    await nc.close();
  }
});

/** `NODES` brokers on a prefix nobody used: no topic stream, no bucket yet. */
async function freshNodes(): Promise<NatsBroker[]> {
  const prefix = `${run}n${++prefixes}`;
  const nodes = await Promise.all(
    Array.from({ length: NODES }, () =>
      NatsBroker.connect({ servers: NATS_URL, prefix, timeoutMs: 5_000 }),
    ),
  );
  brokers.push(...nodes);
  return nodes;
}

/** An error with its causes, which name what NATS answered. */
function explain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e !== undefined; e = e instanceof Error ? e.cause : undefined) {
    parts.push(e instanceof Error ? `${e.name}: ${e.message}` : JSON.stringify(e));
  }
  return parts.join(' <- ');
}

describe.skipIf(skip)('NATS streams made by several nodes at once', () => {
  it('first publishes to new topics from every node at once all land, numbered 1..n', async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const nodes = await freshNodes();
      const topics = Array.from({ length: TOPICS_PER_ROUND }, (_, i) => `t${i}`);
      await Promise.all(
        topics.map(async (topic) => {
          const outcomes = await Promise.allSettled(
            nodes.map((node, i) => node.publish(topic, JSON.stringify(i))),
          );
          const seqs: number[] = [];
          for (const outcome of outcomes) {
            if (outcome.status === 'rejected') failures.push(explain(outcome.reason));
            else seqs.push(outcome.value);
          }
          if (failures.length === 0) {
            expect(seqs.sort((x, y) => x - y)).toEqual(nodes.map((_, i) => i + 1));
          }
        }),
      );
      await Promise.all(brokers.splice(0).map((broker) => broker.close()));
    }
    expect(failures).toEqual([]);
  }, 60_000);

  it('the first publishOnce of a key through every node at once lands once and fails nowhere', async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const nodes = await freshNodes();
      const topics = Array.from({ length: TOPICS_PER_ROUND }, (_, i) => `t${i}`);
      await Promise.all(
        topics.map(async (topic) => {
          const key = randomBytes(8).toString('hex');
          const outcomes = await Promise.allSettled(
            nodes.map((node) => node.publishOnce(topic, '"once"', key, 60_000)),
          );
          const answers: { seq: number; duplicate: boolean }[] = [];
          for (const outcome of outcomes) {
            if (outcome.status === 'rejected') failures.push(explain(outcome.reason));
            else answers.push(outcome.value);
          }
          if (answers.length === nodes.length) {
            expect(new Set(answers.map((a) => a.seq))).toEqual(new Set([1]));
            expect(answers.filter((a) => !a.duplicate)).toHaveLength(1);
          }
          // A retry after them all is answered from the bucket.
          await nodes[0]!.publishOnce(topic, '"once"', key, 60_000).then(
            (late) => expect(late).toEqual({ seq: 1, duplicate: true }),
            (err: unknown) => failures.push(explain(err)),
          );
        }),
      );
      await Promise.all(brokers.splice(0).map((broker) => broker.close()));
    }
    expect(failures).toEqual([]);
  }, 60_000);
});
