/**
 * A history read on NATS of a topic whose stream keeps fewer messages than are published while
 * the read runs (history.maxLength 0 or 1 on a busy topic): the messages the page asked for age
 * out before its consumer reaches them, and every fetch brings newer ones, past the page. The
 * read ends its page there (those messages are gone) rather than fetch on for as long as the
 * topic is busy: it used to run until the broker's timeout, and a resume then told a gap of
 * unknown size after seconds of silence. The busy publisher is real, driven by the fetches.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readHistory } from '../../src/pubsub/nats-history.js';
import type { Link } from '../../src/pubsub/nats-link.js';
import { withConsumerHooks } from '../support/nats-consumer-hooks.js';
import { canConnect } from '../support/network.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const skip = !(await canConnect(4222)) && process.env.CI !== 'true';
const stream = `wsrpcpassed${randomBytes(4).toString('hex')}`;
const busySubject = `${stream}.t`;
/** A stream keeping 150 messages, for a page that ages out in part. */
const longer = `${stream}long`;
/** Fetches after which the read is taken to be fetching without end. */
const FETCH_BOUND = 20;

let nc: NatsConnection;
let link: Link;

/**
 * `link` on a busy topic: one more message is published (and stored) before each fetch of the
 * read's consumer, and before its consumer is made, as a publisher at a steady rate would. The
 * count of fetches made is read from `fetches`.
 */
function busyTopic(
  subject = busySubject,
  beforeConsumer = 1,
  perFetch = 1,
): { link: Link; fetches: () => number } {
  let fetches = 0;
  const publish = async (count: number) => {
    for (let i = 0; i < count; i++) await link.js.publish(subject, 'newer');
  };
  const busy = withConsumerHooks(link, {
    beforeConsumer: () => publish(beforeConsumer),
    fetch: async (fetch) => {
      if (++fetches > FETCH_BOUND) throw new Error(`more than ${FETCH_BOUND} fetches`);
      await publish(perFetch);
      return fetch();
    },
  });
  return { link: busy, fetches: () => fetches };
}

describe.skipIf(skip)('NATS history: a page whose messages aged out while it was read', () => {
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL });
    link = { nc, js: jetstream(nc), jsm: await jetstreamManager(nc, { checkAPI: false }) };
    // One message kept, as for history.maxLength 0 or 1.
    await link.jsm.streams.add({ name: stream, subjects: [busySubject], max_msgs: 1 });
    for (let i = 1; i <= 5; i++) await link.js.publish(busySubject, String(i));
    await link.jsm.streams.add({ name: longer, subjects: [`${longer}.t`], max_msgs: 150 });
    for (let i = 1; i <= 300; i++) await link.js.publish(`${longer}.t`, String(i));
  });

  afterAll(async () => {
    await link.jsm.streams.delete(stream).catch(() => false);
    await link.jsm.streams.delete(longer).catch(() => false);
    await nc.close();
  });

  it('ends the page at the first message past it, with what it read', async () => {
    const busy = busyTopic();
    // The stream holds seq 5 alone when the read looks; 6 is stored before its consumer reads.
    const history = await readHistory(busy.link, stream, 't', 3);
    expect({ lastSeq: history.lastSeq, seqs: history.messages.map((m) => m.seq) }).toEqual({
      lastSeq: 5,
      seqs: [],
    });
    expect(busy.fetches()).toBe(1);
  });

  it('goes on from the oldest message still held, up to the last seq it began with', async () => {
    // Seqs 151 to 300 held when the read looks; 110 more stored before its consumer reads, so
    // 151 to 260 are gone and 261 to 300 still held: the page holds them, as Redis's would.
    const busy = busyTopic(`${longer}.t`, 110, 0);
    const history = await readHistory(busy.link, longer, 't', 150, 100);
    expect(history.lastSeq).toBe(300);
    expect(history.messages.map((m) => m.seq)).toEqual(
      Array.from({ length: 40 }, (_, i) => 261 + i),
    );
  });
});
